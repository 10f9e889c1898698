"""The Environment section: each machine and software the runs recorded (env.json), runs that share one in one
column, and their GPUs as NVML saw them before the run."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from trainbench.render.page import Section, cell_text, heading, paragraph, table
from trainbench.report.found import Environment, ReportData, short_names
from trainbench.report.sections.common import absent, rows_table


def _gpus(env: dict[str, Any]) -> list[dict[str, Any]]:
    gpu = found if isinstance(found := env.get("gpu"), dict) else {}
    gpus = listed if isinstance(listed := gpu.get("gpus"), list) else []
    return [each for each in gpus if isinstance(each, dict)]


def _environment_fields(env: dict[str, Any]) -> dict[str, Any]:
    gpu = found if isinstance(found := env.get("gpu"), dict) else {}
    command = env.get("command")
    names = [str(g.get("name")) for g in _gpus(env) if g.get("name")]
    fields = {
        "command": (" ".join(map(str, command)) if isinstance(command, list) else command) or None,
        "time (UTC)": env.get("time_utc"),
        "trainbench": f"{env.get('trainbench_version')} (commit {env.get('suite_commit')})",
        "host": env.get("hostname"),
        "platform": env.get("platform"),
        "python": env.get("python"),
        "CPU": env.get("cpu_class") or env.get("cpu_model"),  # older runs recorded the model name only
        "CPU cores (usable)": f"{env.get('cpu_count')} ({env.get('cpus_usable', env.get('cpu_count'))})",
        "CUDA_VISIBLE_DEVICES": env.get("cuda_visible_devices"),
        "GPUs": ", ".join(names) or f"none seen by NVML ({gpu.get('unavailable') or 'no GPU'})",
        "GPU driver": gpu.get("driver"),
        "CUDA driver": gpu.get("cuda_driver"),
    }
    framework = found if isinstance(found := env.get("framework"), dict) else {}
    for name, value in framework.items():  # what the workers' framework reported
        fields[name if name not in fields else f"framework: {name}"] = value
    return fields


def _text_or_none(value: Any) -> str | None:
    return None if value is None or value == "" or value == [] else cell_text(value)


_GPU_COLUMNS = ("index", "name", "compute_capability", "memory_total_mib", "sm_clock_mhz", "sm_clock_max_mhz",
                "sm_application_clock_mhz", "memory_clock_mhz", "memory_clock_max_mhz", "power_w", "power_limit_w",
                "temperature_c", "performance_state", "persistence_mode", "unavailable")


def _environment_columns(environments: Sequence[Environment]) -> list[str]:
    """Each environment's first folder (named apart from the others') and how many more share it (the "runs" row
    names them all)."""
    names = short_names([environment.folders[0] for environment in environments])
    return [names[environment.folders[0]] + (f" and {len(environment.folders) - 1} more"
                                             if len(environment.folders) > 1 else "") for environment in environments]


_PER_RUN = ("command", "time (UTC)")  # what each run of one environment has of its own


def _environment_column(environment: Environment, names: dict[Path, str]) -> dict[str, Any]:
    """One environment's values: every run it holds by name, and a run's own command and time where the runs
    differ in them (each run's, named), rather than the first run's standing for all."""
    column = {"runs": ", ".join(names[folder] for folder in environment.folders),
              **_environment_fields(environment.env)}
    own = [_environment_fields(env) for env in environment.envs] or [column]
    for name in _PER_RUN:
        values = [each.get(name) for each in own]
        if len(set(map(str, values))) > 1:
            column[name] = "; ".join(f"{names[folder]}: {_text_or_none(value) or '-'}"
                                    for folder, value in zip(environment.folders, values, strict=True))
    return column


def environment_section(data: ReportData) -> Section:
    title = "Environment"
    if not data.environments:
        return absent("environment", title, "No env.json in the folders given: the runs' machine is unknown.")
    names = short_names([folder for environment in data.environments for folder in environment.folders])
    fields = [_environment_column(environment, names) for environment in data.environments]
    rows_of = list(dict.fromkeys(name for each in fields for name in each))
    # as text (left-aligned like the rest of the column); a row empty in every column is left out
    rows = [[name, *(_text_or_none(each.get(name)) for each in fields)] for name in rows_of]
    rows = [row for row in rows if any(value is not None for value in row[1:])]
    parts = [paragraph("As each run recorded it before measuring (env.json); runs on the same machine and software "
                       "share a column (versions compared in any notation: cuDNN 90100 is 9.1.0); runs: every run "
                       "the column holds; a command or time that differs between them is given per run.", "note"),
             table(["", *_environment_columns(data.environments)], rows)]
    for environment, column in zip(data.environments, _environment_columns(data.environments), strict=True):
        gpus = _gpus(environment.env)
        if gpus:
            parts.append(heading(f"GPUs of {column} (NVML, idle, before the run)"))
            parts.append(rows_table(_GPU_COLUMNS, gpus, keep=("index", "name")))
    return Section("environment", title, "".join(parts))
