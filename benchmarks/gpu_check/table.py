"""The goals, the merge of parts into one gpu_check.json, and the README table. No torch, no subprocess: the fast
tests check this module alone."""

from __future__ import annotations

import fnmatch
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

NOT_RUN_NO_GPU = "not run: no GPU"


@dataclass(frozen=True)
class Goal:
    text: str
    met: Callable[[float], bool]


# Figure name patterns -> the goal of issue 31 (GPU goals: judged only when the figures come from a GPU).
GOALS: dict[str, Goal] = {
    "sampler_ratio_b*": Goal(">= 0.99 (on / off)", lambda v: v >= 0.99),
    "energy_over_sampled_b*": Goal("within 5 % of 1", lambda v: abs(v - 1.0) <= 0.05),
    "best_images_per_sec": Goal(">= 4,000 images/s", lambda v: v >= 4000.0),
    "best_at_32": Goal(">= 2,500 images/s", lambda v: v >= 2500.0),
    "loader_gpu_of_synthetic": Goal(">= 0.90 of synthetic", lambda v: v >= 0.90),
    "torchrun_ratio_b*": Goal(">= 0.98 (torchrun / plain)", lambda v: v >= 0.98),
}
MODE_PREFIXES = ("eager", "cuda_graph", "reduce_overhead")


def goal_of(name: str) -> Goal | None:
    return next((goal for pattern, goal in GOALS.items() if fnmatch.fnmatchcase(name, pattern)), None)


def verdict(name: str, value: Any, device: str) -> str:
    """'met', 'missed', '' (no goal) or why it is not judged."""
    goal = goal_of(name)
    if goal is None:
        return ""
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return "no figure"
    if device != "cuda":
        return "not judged: cpu"
    return "met" if goal.met(float(value)) else "missed"


def derived(steps: dict[str, dict[str, Any]]) -> dict[str, float]:
    """Figures across the step-mode steps: the best images/s of any mode and batch size, and the best at batch 32."""
    rates = {name: value for step in steps.values() for name, value in step.get("figures", {}).items()
             if name.startswith(MODE_PREFIXES) and "_b" in name and isinstance(value, int | float)}
    found: dict[str, float] = {}
    if rates:
        found["best_images_per_sec"] = max(rates.values())
    at_32 = [value for name, value in rates.items() if name.endswith("_b32")]
    if at_32:
        found["best_at_32"] = max(at_32)
    return found


def merge(earlier: dict[str, Any] | None, part: int, new: dict[str, Any]) -> dict[str, Any]:
    """gpu_check.json with part ``part`` added; a part already recorded is refused (ValueError), never replaced."""
    merged = dict(earlier or {"parts": {}, "steps": {}})
    if str(part) in merged["parts"]:
        raise ValueError(f"part {part} is already recorded")
    clash = sorted(set(new["steps"]) & set(merged["steps"]))
    if clash:
        raise ValueError(f"steps already recorded: {', '.join(clash)}")
    merged["parts"] = {**merged["parts"], str(part): new["part"]}
    merged["steps"] = {**merged["steps"], **new["steps"]}
    merged["environment"] = merged.get("environment") or new.get("environment")
    merged["derived"] = derived(merged["steps"])
    return merged


def fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if abs(value) < 10 else f"{value:,.1f}"
    return "" if value is None else str(value)


def rows(record: dict[str, Any]) -> list[dict[str, str]]:
    """One row per figure (figure, value, goal, met, command): the step's figures, the figures it should have had
    (its status as the value), the figures a CPU run cannot have ("not run: no GPU"); a step with none, one row."""
    out: list[dict[str, str]] = []
    for step in record["steps"].values():
        device, status = step.get("device", "cpu"), step["status"]
        command = "; ".join(step.get("commands", [])) or "-"
        figures, not_run = step.get("figures", {}), step.get("not_run", {})
        # The GPU's figure names stand for a step with nothing measured; a CPU run shows what it measured.
        expected = step.get("expected", []) if device == "cuda" or status != "ok" or not figures else []
        names = list(dict.fromkeys([*expected, *figures, *not_run])) or [step["name"]]
        for index, name in enumerate(names):
            goal = goal_of(name)
            value = figures.get(name)
            if name in not_run and value is None:
                text = not_run[name]
            elif value is not None:
                text = fmt(value)
            else:
                text = status if status != "ok" else "no figure"
            out.append({"figure": name, "value": text, "goal": goal.text if goal else "",
                        "met": verdict(name, value, device) if value is not None else "",
                        "command": command if index == 0 else "(as above)"})
    devices = {step.get("device") for step in record["steps"].values()}
    for name, value in record.get("derived", {}).items():
        goal = goal_of(name)
        out.append({"figure": name, "value": fmt(value), "goal": goal.text if goal else "",
                    "met": verdict(name, value, "cuda" if devices == {"cuda"} else "cpu"),
                    "command": "best of the eager, cuda_graph and reduce_overhead steps"})
    return out


def suite_line(suite: dict[str, Any] | None) -> str:
    if not suite:
        return "Suite: no run folder with an env.json."
    framework = suite.get("framework") or {}
    return (f"Suite: trainbench {suite.get('trainbench_version')}, commit {suite.get('suite_commit') or 'unknown'}; "
            f"torch {framework.get('torch')}, torchvision {framework.get('torchvision')}, CUDA "
            f"{framework.get('cuda')}, cuDNN {framework.get('cudnn')} (`{suite.get('from')}`).")


def markdown(record: dict[str, Any]) -> str:
    """README.md: device, driver and versions, the table, then every failure with its first error line."""
    env = record.get("environment") or {}
    nvml, torch_facts, packages = env.get("nvml", {}), env.get("torch", {}), env.get("packages", {})
    versions = ", ".join(f"{name} {version}" for name, version in packages.items() if version) or "unknown"
    tools = ", ".join(f"{name}: {facts.get('version') or 'absent'}" for name, facts in env.get("tools", {}).items())
    lines = ["# gpu_check: the suite on one machine, every check at once", "",
             f"Device: {', '.join(nvml.get('gpus') or []) or 'no GPU (' + str(nvml.get('error')) + ')'}; "
             f"driver {nvml.get('driver') or '-'}; CUDA {torch_facts.get('cuda') or '-'}, cuDNN "
             f"{torch_facts.get('cudnn') or '-'}; Python {env.get('python', '?')}.", "",
             f"Versions: {versions}.", "", f"Tools: {tools or 'unknown'}.", "", suite_line(record.get("suite")), "",
             "Parts: " + "; ".join(f"part {part}: {facts.get('command')} ({facts.get('seconds', 0):.0f} s, "
                                   f"{facts.get('time_utc')})" for part, facts in sorted(record["parts"].items())),
             "", "| figure | value | goal | met | command |", "|---|---:|---|---|---|"]
    for row in rows(record):
        command = row["command"].replace("|", "\\|")
        command = command if command == "(as above)" else f"`{command}`"
        lines.append(f"| {row['figure']} | {row['value']} | {row['goal']} | {row['met']} | {command} |")
    failures = [step for step in record["steps"].values() if step["status"].startswith(("failed", "timed out"))]
    lines += ["", "## Failures", ""]
    lines += [f"- {step['name']}: {step['status']} (log: `{step.get('log')}`)" for step in failures] or ["None."]
    return "\n".join(lines) + "\n"
