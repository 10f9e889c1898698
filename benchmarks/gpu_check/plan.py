"""The steps of the four parts: each one's command lines (the suite's CLI and benchmark scripts, never copies of
them), its time budget on a GPU, what it needs, and how its figures are read from the files it writes.

GPU sizes are the issue's (bf16, channels-last ResNet-50 at batch 32, 128, 256; part 4: Llama-3.2-1B at 8,192
tokens); ``--device cpu`` keeps every command but at tiny sizes (fp32, 32 px, batch 2, one or two steps; the tiny
Llama), the smoke run CI checks.
"""

from __future__ import annotations

import csv
import json
import shutil
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gpu_speed

REPO = Path(__file__).resolve().parents[2]
PARTS = (1, 2, 3, 4)
PART_BUDGET_S = 510  # the budgets of one part's steps sum to at most this: a part ends well inside 9 minutes
GPU_BATCHES = (32, 128, 256)
WORKLOADS = {  # published size; batch per GPU on one H100 (80 GB); needs
    "resnet50": (256, ()), "transformer": (64, ()), "bert": (64, ("transformers",)),
    "gpt2": (8, ("transformers",)), "retinanet": (16, ()),
}
IMAGE_WORKLOADS = ("resnet50", "retinanet")


class StepFailure(Exception):
    """A step ran but its result cannot be read: the message is its status line."""


@dataclass
class Context:
    device: str
    output: Path
    python: str
    done: dict[str, dict[str, Any]] = field(default_factory=dict)  # steps recorded so far, earlier parts too
    scratch_dir: Path | None = None  # the generated JPEGs and TFRecords: big, never in the results folder

    @property
    def scratch(self) -> Path:
        return self.scratch_dir or self.output / "scratch"

    @property
    def gpu(self) -> bool:
        return self.device == "cuda"

    def folder(self, step: str) -> Path:
        return self.output / "runs" / step


Commands = Callable[[Context], list[list[str]]]
Reader = Callable[[Context, str], dict[str, Any]]


@dataclass(frozen=True)
class Step:
    name: str
    part: int
    budget_s: int  # on a GPU; --device cpu allows CPU_BUDGET_S
    commands: Commands
    read: Reader  # (context, the last command's stdout) -> figures, "info" (facts kept beside them) and "failure"
    gpu_only: bool = False
    needs: tuple[str, ...] = ()  # "tool:ncu", "package:transformers"
    expected: tuple[str, ...] = ()  # the figures on a GPU: the rows of a step not run
    gpu_figures: tuple[str, ...] = ()  # figures a CPU run of this step cannot have
    ok_codes: tuple[int, ...] = (0,)  # 1 too for commands that exit 1 with their figures (a goal or batch missed)


CPU_BUDGET_S = 900  # a loaded 2-core CI machine; the GPU budgets are the ones that matter


def trainbench(ctx: Context, *args: str) -> list[str]:
    return [ctx.python, "-m", "trainbench", *args]


def script(ctx: Context, name: str, *args: str) -> list[str]:
    return [ctx.python, f"benchmarks/{name}", *args]


def common(ctx: Context, warmup: bool = True) -> list[str]:
    """PyTorch ResNet-50: bf16 channels-last on the GPU; fp32, 32 px, one warm-up step on the CPU."""
    if ctx.gpu:
        return ["--framework", "torch", "--device", "cuda", "--precision", "bf16", "--channels-last"]
    return ["--framework", "torch", "--device", "cpu", "--precision", "fp32", "--image-size", "32",
            *(["--warmup", "1"] if warmup else [])]


def batches(ctx: Context) -> str:
    return ",".join(map(str, GPU_BATCHES)) if ctx.gpu else "2"


def last_json(stdout: str) -> dict[str, Any]:
    lines = stdout.strip().splitlines()
    if not lines:
        raise StepFailure("failed: it printed nothing")
    try:
        found: dict[str, Any] = json.loads(lines[-1])
    except json.JSONDecodeError as error:
        raise StepFailure(f"failed: its last line is not JSON ({error})") from None
    return found


def newest(folder: Path, pattern: str) -> Path:
    found = sorted(folder.rglob(pattern), key=lambda path: path.stat().st_mtime)
    if not found:
        raise StepFailure(f"failed: no {pattern} under {folder}")
    return found[-1]


def summary_rows(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The newest run folder's summary.json under ``folder``: kept even when the sweep was stopped."""
    summary = json.loads(newest(folder, "summary.json").read_text())
    return summary, summary["results"]


def first_row_csv(path: Path) -> dict[str, str]:
    with open(path, newline="") as file:
        rows = list(csv.DictReader(file))
    if not rows:
        raise StepFailure(f"failed: {path.name} has no row")
    return rows[0]


def number(text: Any) -> float | None:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value else None  # NaN: no figure


# ---- part 1 ----------------------------------------------------------------------------------------------------

def read_environment(ctx: Context, stdout: str) -> dict[str, Any]:
    facts = last_json(stdout)
    return {"info": facts, "gpus_visible": len(facts.get("nvml", {}).get("gpus") or [])}


def read_nvml(ctx: Context, stdout: str) -> dict[str, Any]:
    facts = last_json(stdout)
    kept = ("energy_update_period_ms", "violation_policies_answering", "power_usage_w", "power_instant_w")
    return {"info": facts, **{name: facts.get(name) for name in kept}}


def telemetry_commands(ctx: Context) -> list[list[str]]:
    pairs, steps = ("2", "150") if ctx.gpu else ("1", "1")
    return [script(ctx, "telemetry_overhead.py", "--pairs", pairs, "--keep", str(ctx.folder("telemetry")), "--",
                   *common(ctx), "--batch-sizes", batches(ctx), "--steps", steps)]


def read_telemetry(ctx: Context, stdout: str) -> dict[str, Any]:
    found = last_json(stdout)
    figures: dict[str, Any] = {"info": {"notes": found.get("notes"), "energy": found.get("energy")}}
    for figure in found["figures"]:
        figures[f"sampler_ratio_b{figure['batch_size']}"] = figure["ratio_b_over_a"]
    by_batch: dict[int, list[float]] = {}
    for check in found.get("energy") or []:
        by_batch.setdefault(check["batch_size"], []).append(check["energy_over_sampled"])
    for batch, values in sorted(by_batch.items()):
        figures[f"energy_over_sampled_b{batch}"] = statistics.median(values)
    return figures


def copy_telemetry_png(ctx: Context, stdout: str) -> dict[str, Any]:
    """The timeline picture of the last "on" run (sampler on) of the telemetry step, beside gpu_check.json."""
    found = sorted(ctx.folder("telemetry").glob("b_*/*/telemetry.png"))
    if not found:
        import importlib.util

        if importlib.util.find_spec("matplotlib") is None:
            raise StepFailure("failed: not drawn: matplotlib missing")
        raise StepFailure("failed: no telemetry.png in the telemetry step's runs (no timeline sample?)")
    shutil.copyfile(found[-1], ctx.output / "telemetry.png")
    return {"telemetry_png": "telemetry.png", "info": {"from": str(found[-1].relative_to(ctx.output))}}


# ---- part 2 ----------------------------------------------------------------------------------------------------

def mode_step(mode: str, budget_s: int, gpu_only: bool) -> Step:
    key = mode.replace("-", "_")

    def commands(ctx: Context) -> list[list[str]]:
        steps = "100" if ctx.gpu else "1"
        return [trainbench(ctx, "throughput", *common(ctx), *gpu_speed.mode_options(mode), "--batch-sizes",
                           batches(ctx), "--steps", steps, "--timeout", str(budget_s - 10) if ctx.gpu else "600",
                           "--output", str(ctx.folder(key)))]

    def read(ctx: Context, stdout: str) -> dict[str, Any]:
        _, results = summary_rows(ctx.folder(key))
        figures: dict[str, Any] = {}
        for row in results:
            ok = row["status"] == "ok"
            figures[f"{key}_b{row['batch_size']}"] = row["samples_per_sec"] if ok else None
            if row.get("compile_s") is not None:
                figures[f"compile_s_{key}_b{row['batch_size']}"] = row["compile_s"]
        failed = [f"batch {row['batch_size']}: {row.get('error')}" for row in results if row["status"] != "ok"]
        if failed:  # the other batch sizes' figures stand; the step says which one failed and why
            figures["failure"] = f"failed: {failed[0]}" + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")
        return figures

    return Step(key, 2, budget_s, commands, read, gpu_only=gpu_only, ok_codes=(0, 1),
                expected=tuple(f"{key}_b{batch}" for batch in GPU_BATCHES))


def data_commands(ctx: Context) -> list[list[str]]:
    folder = ctx.scratch / "data"
    classes, per_class, size, shards = ("100", "10", "500x375", "16") if ctx.gpu else ("2", "3", "64x48", "2")
    return [trainbench(ctx, "data", "synth", "--output", str(folder / "jpeg"), "--classes", classes,
                       "--train-per-class", per_class, "--val-per-class", "1", "--size", size),
            trainbench(ctx, "data", "convert", str(folder / "jpeg"), "--output", str(folder / "tfrecords"),
                       "--train-shards", shards, "--validation-shards", "1")]


def read_data(ctx: Context, stdout: str) -> dict[str, Any]:
    folder = ctx.scratch / "data"
    shards = sorted((folder / "tfrecords").glob("train-*"))
    if not shards:
        raise StepFailure("failed: no train-* shard written")
    return {"jpeg_images": sum(1 for _ in (folder / "jpeg" / "train").rglob("*.JPEG")), "train_shards": len(shards)}


def data_mode(ctx: Context) -> str:
    """The loaders run in the fastest step mode measured at their batch size (eager when none was)."""
    batch = GPU_BATCHES[-1] if ctx.gpu else 2
    rates = {name: (ctx.done.get(name, {}).get("figures") or {}).get(f"{name}_b{batch}") or 0.0
             for name in ("eager", "cuda_graph", "reduce_overhead")}
    best = max(rates, key=lambda name: rates[name])
    return best.replace("_", "-") if rates[best] else "eager"


def loader_commands(ctx: Context) -> list[list[str]]:
    if ctx.done.get("data", {}).get("status") != "ok":
        raise StepFailure("not run: the data step has no TFRecords")
    sizes = (["--data-batch", "256", "--batch-sizes", "256", "--steps", "50", "--loaders", "cpu,gpu"] if ctx.gpu else
             ["--data-batch", "2", "--batch-sizes", "2", "--steps", "1", "--loaders", "cpu", "--device", "cpu",
              "--precision", "fp32", "--image-size", "32", "--warmup", "1"])
    return [script(ctx, "gpu_speed.py", "--skip-modes", "--data-mode", data_mode(ctx), "--shards",
                   str(ctx.scratch / "data" / "tfrecords"), *sizes, "--output", str(ctx.folder("loaders")))]


def read_loaders(ctx: Context, stdout: str) -> dict[str, Any]:
    found = json.loads((ctx.folder("loaders") / "gpu_speed.json").read_text())
    data = found["loaders"]
    figures: dict[str, Any] = {"synthetic_images_per_sec": gpu_speed.rate(data["synthetic"]),
                               "info": {"mode": data["mode"], "batch_size": data["batch_size"]}}
    for loader, facts in found["summary"].get("loaders", {}).items():
        figures[f"loader_{loader}_images_per_sec"] = facts["training"]
        figures[f"loader_{loader}_of_synthetic"] = facts["of_synthetic"]
        figures[f"loader_{loader}_alone_images_per_sec"] = facts["alone"]
    return figures


def torchrun_commands(ctx: Context) -> list[list[str]]:
    sizes = ["--batch-sizes", "256", "--steps", "100"] if ctx.gpu else ["--batch-sizes", "2", "--steps", "1"]
    return [script(ctx, "torchrun_overhead.py", "--pairs", "1", "--", *common(ctx)[2:], *sizes)]


def read_torchrun(ctx: Context, stdout: str) -> dict[str, Any]:
    return {f"torchrun_ratio_b{figure['batch_size']}": figure["ratio_b_over_a"]
            for figure in last_json(stdout)["figures"]}


# ---- part 3 ----------------------------------------------------------------------------------------------------

def profile_commands(profiler: str, budget_s: int) -> Commands:
    def commands(ctx: Context) -> list[list[str]]:
        window = ["--start-iteration", "1", "--iterations", "1", "--clock-control", "none"] if profiler == "ncu" else \
            ["--start-iteration", "2", "--iterations", "3"]
        return [trainbench(ctx, "profile", profiler, *common(ctx, warmup=False), "--batch-sizes", "32", *window,
                           "--timeout", str(budget_s - 15), "--output", str(ctx.folder(profiler)))]
    return commands


def read_ncu(ctx: Context, stdout: str) -> dict[str, Any]:
    row = first_row_csv(newest(ctx.folder("ncu"), "summary.csv"))
    cores = ("fma", "fp16", "tensor", "sfu")  # coreutil's four, % of peak weighted by cycles
    figures: dict[str, Any] = {f"ncu_{core}_pct_b32": number(row.get(core)) for core in cores}
    figures["ncu_kernels_b32"] = number(row.get("kernels"))
    figures["info"] = {"metrics": {core: row.get(f"{core}_metric") for core in cores},
                       "status": row.get("status"), "error": row.get("error")}
    return figures


def read_nsys(ctx: Context, stdout: str) -> dict[str, Any]:
    row = first_row_csv(newest(ctx.folder("nsys"), "summary.csv"))
    return {"nsys_gpu_busy_fraction_b32": number(row.get("gpu_busy_fraction")),
            "nsys_step_gpu_ms_median_b32": number(row.get("step_gpu_ms_median")),
            "info": {"status": row.get("status"), "error": row.get("error")}}


def variability_commands(ctx: Context) -> list[list[str]]:
    sizes = ["--batch-sizes", "128", "--steps", "40", "--repetitions", "5"] if ctx.gpu else \
        ["--batch-sizes", "2", "--steps", "1", "--repetitions", "2"]
    return [trainbench(ctx, "variability", "run", *common(ctx), *sizes, "--output", str(ctx.folder("variability")))]


def read_variability(ctx: Context, stdout: str) -> dict[str, Any]:
    with open(newest(ctx.folder("variability"), "variability_across.csv"), newline="") as file:
        rows = [row for row in csv.DictReader(file) if row["scope"] == "runs"]
    if not rows:
        raise StepFailure("failed: variability_across.csv has no 'runs' row")
    batch = rows[0]["batch_size"]
    return {f"variability_cv_pct_b{batch}": number(rows[0]["cv_pct"]),
            f"variability_spread_pct_b{batch}": number(rows[0]["spread_pct"]),
            f"variability_repetitions_b{batch}": number(rows[0]["n"])}


def workload_step(name: str, batch: int, needs: tuple[str, ...]) -> Step:
    key = f"workload_{name}"

    def commands(ctx: Context) -> list[list[str]]:
        if ctx.gpu:
            layout = ["--channels-last"] if name in IMAGE_WORKLOADS else []
            settings = ["--size", "full", "--device", "cuda", "--precision", "bf16", *layout, "--batch-sizes",
                        str(batch), "--warmup", "5", "--steps", "20", "--timeout", "25"]
        else:
            settings = ["--size", "tiny", "--device", "cpu", "--precision", "fp32", "--batch-sizes", "2",
                        "--warmup", "1", "--steps", "1"]
        return [trainbench(ctx, "throughput", "--framework", "torch", "--workload", name, *settings,
                           "--output", str(ctx.folder(key)))]

    def read(ctx: Context, stdout: str) -> dict[str, Any]:
        summary, results = summary_rows(ctx.folder(key))
        row = results[0]
        if row["status"] != "ok":
            return {"failure": f"failed: {row.get('error')}"}
        found = {f"{name}_samples_per_sec": row["samples_per_sec"], f"{name}_tokens_per_sec": row.get("tokens_per_sec"),
                 f"{name}_joules_per_sample": row.get("joules_per_sample"), f"{name}_mfu": row.get("mfu"),
                 f"{name}_peak_memory_bytes": row.get("peak_memory_bytes")}
        # tokens/s only for sequence workloads; energy and MFU only on a GPU (the CPU's rows say so)
        figures: dict[str, Any] = {key: value for key, value in found.items() if value is not None}
        return {**figures, "info": {"unit": summary.get("sample_unit"), "batch_size": row["batch_size"],
                                    "notes": [row.get("telemetry_note"), row.get("mfu_note")]}}

    figures = (f"{name}_samples_per_sec", f"{name}_joules_per_sample")
    return Step(key, 3, 32, commands, read, needs=tuple(f"package:{p}" for p in needs), expected=figures,
                gpu_figures=(f"{name}_joules_per_sample", f"{name}_mfu"), ok_codes=(0, 1))


# ---- part 4 ----------------------------------------------------------------------------------------------------

# Llama-3.2-1B (1.24 B parameters) at 8,192 tokens, bf16, fused AdamW (its reference optimizer). Each batch size is a
# worker of its own: some 20-30 s of start-up before its first step (imports, the model built on the host and copied
# over, its FLOPs counted and its step probed at the run's batch), then about 0.3-0.75 s a sequence a step on an
# H100-class GPU. Largest batch first: a step stopped at its budget has kept the figures that matter most.
LLAMA_BATCHES = (4, 2, 1)
LLAMA_SEQ_LEN = 8192  # the workload's default at 1b, given so that the command says it
LLAMA_FIGURES = ("tokens_per_sec", "mfu", "hfu", "peak_memory_bytes")
LLAMA_GPU_FIGURES = ("mfu", "hfu")  # against a GPU's peak: the CPU's rows have none
LLAMA_MAX_BATCH_START = 4  # about 20 GB of parameters, gradients and AdamW state, then some 30 GB a sequence
# On the CPU the peak is the worker's resident set (~800 MiB, hardly moving with a tiny batch), so no limit parts
# two batch sizes: under 1 MiB the first try (batch 1) is over it and the search ends there, its plumbing run.
CPU_MEMORY_LIMIT = "1MiB"
MAX_BATCH_FIGURE = "llama_1b_max_batch_none"


def llama_settings(ctx: Context, warmup: int, steps: int, timeout_s: int) -> list[str]:
    """Llama-3.2-1B, bf16, 8,192 tokens on the GPU (each worker given up after ``timeout_s``); the tiny Llama in
    fp32, one warm-up and one timed step, on the CPU."""
    if ctx.gpu:
        return ["--size", "1b", "--seq-len", str(LLAMA_SEQ_LEN), "--device", "cuda", "--precision", "bf16",
                "--warmup", str(warmup), "--steps", str(steps), "--timeout", str(timeout_s)]
    return ["--size", "tiny", "--device", "cpu", "--precision", "fp32", "--warmup", "1", "--steps", "1"]


def llama(ctx: Context, checkpointing: str, *args: str) -> list[str]:
    return trainbench(ctx, "throughput", "--framework", "torch", "--workload", "llama", "--activation-checkpointing",
                      checkpointing, *args)


def ran_with(row: dict[str, Any], checkpointing: str) -> None:
    """A result measured with other activation checkpointing than the step asked for is no figure of the step."""
    if row.get("activation_checkpointing") != checkpointing:
        raise StepFailure(f"failed: batch {row['batch_size']} ran with --activation-checkpointing "
                          f"{row.get('activation_checkpointing')}, not {checkpointing}")


def llama_step(checkpointing: str, budget_s: int, timeout_s: int) -> Step:
    """``trainbench throughput`` of Llama-3.2-1B at batch 4, 2 and 1 with ``--activation-checkpointing``
    ``checkpointing``: tokens/s, MFU, HFU and peak memory per batch size (``full``: the hardware FLOPs per sample
    too, the recomputed forward included). A batch size out of memory is a finding, its figures "oom"."""
    key = f"llama_1b_{checkpointing}"

    def commands(ctx: Context) -> list[list[str]]:
        sizes = ",".join(map(str, LLAMA_BATCHES)) if ctx.gpu else "2"
        return [llama(ctx, checkpointing, *llama_settings(ctx, 2, 5, timeout_s), "--batch-sizes", sizes,
                      "--output", str(ctx.folder(key)))]

    def read(ctx: Context, stdout: str) -> dict[str, Any]:
        summary, results = summary_rows(ctx.folder(key))
        figures: dict[str, Any] = {}
        failed: list[str] = []
        for row in sorted(results, key=lambda row: row["batch_size"]):
            batch = row["batch_size"]
            if row["status"] == "ok":
                ran_with(row, checkpointing)
                figures.update({f"{key}_{name}_b{batch}": row[name] for name in LLAMA_FIGURES
                                if row.get(name) is not None})  # MFU and HFU only on a GPU of known peak
            elif row["status"] == "oom":
                figures.update({f"{key}_{name}_b{batch}": "oom" for name in LLAMA_FIGURES})
            else:
                failed.append(f"batch {batch}: {row['status']}: {row.get('error')}")
        measured = [row for row in results if row["status"] == "ok"]
        if checkpointing != "none" and measured and measured[0].get("hardware_flops_per_sample") is not None:
            figures[f"{key}_hardware_flops_per_sample"] = measured[0]["hardware_flops_per_sample"]
        if failed:  # the other batch sizes' figures stand; the step says which one failed and why
            figures["failure"] = f"failed: {failed[0]}" + (f" (+{len(failed) - 1} more)" if len(failed) > 1 else "")
        lead = measured[0] if measured else {}
        figures["info"] = {
            "params": summary.get("params"), "optimizer": lead.get("optimizer"),
            "attention_kernel": lead.get("attention_kernel"), "parameters": lead.get("parameters"),
            "parameters_held": lead.get("parameters_held"),
            "train_flops_per_sample": lead.get("train_flops_per_sample"), "flops_note": lead.get("flops_note"),
            "mfu_note": lead.get("mfu_note"), "peak_memory_kind": lead.get("peak_memory_kind"),
            "status_by_batch": {row["batch_size"]: row["status"] for row in results}}
        return figures

    batches_shown = sorted(LLAMA_BATCHES)
    expected = tuple(f"{key}_{name}_b{batch}" for batch in batches_shown for name in LLAMA_FIGURES)
    if checkpointing != "none":
        expected += (f"{key}_hardware_flops_per_sample",)
    gpu_figures = tuple(f"{key}_{name}_b{batch}" for batch in batches_shown for name in LLAMA_GPU_FIGURES)
    return Step(key, 4, budget_s, commands, read, needs=("package:transformers",), expected=expected,
                gpu_figures=gpu_figures, ok_codes=(0, 1))


def max_batch_commands(timeout_s: int) -> Commands:
    def commands(ctx: Context) -> list[list[str]]:
        search = ["--batch-sizes", str(LLAMA_MAX_BATCH_START)] if ctx.gpu else \
            ["--batch-sizes", "1", "--memory-limit", CPU_MEMORY_LIMIT]
        return [llama(ctx, "none", *llama_settings(ctx, 1, 3, timeout_s), "--max-batch", *search,
                      "--output", str(ctx.folder("llama_1b_max_batch")))]
    return commands


def read_max_batch(ctx: Context, stdout: str) -> dict[str, Any]:
    """The search's verdict (max_batch.json, written after every try: a search stopped at the step's budget leaves
    what it found): the largest batch that fits, 0 when not even batch 1 does, with its peak memory, tokens/s and
    MFU. A search that did not end says only how large a batch is known to fit (``_at_least``)."""
    path = newest(ctx.folder("llama_1b_max_batch"), "max_batch.json")
    verdict = json.loads(path.read_text())
    fit, miss = verdict["largest_fit"], verdict["first_no_fit"]
    figures: dict[str, Any] = {"info": {
        "complete": verdict["complete"], "start": verdict["start"], "memory_limit_bytes": verdict["memory_limit_bytes"],
        "first_no_fit": miss, "stopped": verdict["stopped"],
        "tries": [[t["batch_size"], t["fits"], t["why"] or t["status"]] for t in verdict["tries"]]}}
    if not verdict["complete"]:
        if fit is not None:
            figures[f"{MAX_BATCH_FIGURE}_at_least"] = fit["batch_size"]
        figures["failure"] = f"failed: the search did not end: {verdict['stopped'] or 'stopped before its end'}"
        return figures
    figures[MAX_BATCH_FIGURE] = fit["batch_size"] if fit is not None else 0
    if fit is not None:
        _, results = summary_rows(path.parent)  # every try is a batch result there
        row = next((row for row in results if row["batch_size"] == fit["batch_size"] and row["status"] == "ok"), None)
        if row is None:
            raise StepFailure(f"failed: summary.json has no result for the largest fit, batch {fit['batch_size']}")
        ran_with(row, "none")
        found = {"peak_memory_bytes": fit["peak_memory_bytes"], "tokens_per_sec": row.get("tokens_per_sec"),
                 "mfu": row.get("mfu")}
        figures.update({f"{MAX_BATCH_FIGURE}_{name}": value for name, value in found.items() if value is not None})
    return figures


def steps() -> list[Step]:
    telemetry_figures = tuple(f"energy_over_sampled_b{batch}" for batch in GPU_BATCHES)
    return [
        Step("environment", 1, 30, lambda ctx: [[ctx.python, "benchmarks/gpu_check/probe.py", "environment"]],
             read_environment),
        Step("nvml_probe", 1, 40, lambda ctx: [[ctx.python, "benchmarks/gpu_check/probe.py", "nvml"]], read_nvml,
             gpu_only=True, needs=("package:pynvml", "package:torch"),
             expected=("energy_update_period_ms", "violation_policies_answering")),
        Step("telemetry", 1, 380, telemetry_commands, read_telemetry,
             expected=tuple(f"sampler_ratio_b{batch}" for batch in GPU_BATCHES) + telemetry_figures,
             gpu_figures=telemetry_figures, ok_codes=(0, 1)),
        Step("telemetry_png", 1, 5, lambda ctx: [], copy_telemetry_png, gpu_only=True, expected=("telemetry_png",)),
        mode_step("eager", 70, gpu_only=False),
        mode_step("cuda-graph", 80, gpu_only=True),
        mode_step("reduce-overhead", 150, gpu_only=True),
        Step("data", 2, 45, data_commands, read_data),
        Step("loaders", 2, 100, loader_commands, read_loaders,
             expected=("loader_cpu_of_synthetic", "loader_gpu_of_synthetic"), gpu_figures=("loader_gpu_of_synthetic",)),
        Step("torchrun", 2, 60, torchrun_commands, read_torchrun, expected=("torchrun_ratio_b256",), ok_codes=(0, 1)),
        Step("ncu", 3, 220, profile_commands("ncu", 220), read_ncu, gpu_only=True, needs=("tool:ncu",),
             expected=("ncu_tensor_pct_b32", "ncu_fma_pct_b32")),
        Step("nsys", 3, 40, profile_commands("nsys", 40), read_nsys, gpu_only=True, needs=("tool:nsys",),
             expected=("nsys_gpu_busy_fraction_b32",)),
        Step("variability", 3, 90, variability_commands, read_variability, expected=("variability_cv_pct_b128",)),
        *(workload_step(name, batch, needs) for name, (batch, needs) in WORKLOADS.items()),
        llama_step("none", 160, 90),  # the part's first worker may also meet a cold disk (torch's first import)
        llama_step("full", 170, 90),
        Step("llama_1b_max_batch", 4, 175, max_batch_commands(75), read_max_batch, needs=("package:transformers",),
             expected=tuple(f"{MAX_BATCH_FIGURE}{suffix}" for suffix in
                            ("", "_peak_memory_bytes", "_tokens_per_sec", "_mfu")),
             gpu_figures=(f"{MAX_BATCH_FIGURE}_mfu",), ok_codes=(0, 1)),
    ]


def part_steps(part: int) -> list[Step]:
    return [step for step in steps() if step.part == part]
