"""``trainbench variability run|report`` under bad, odd and hostile input: GPUs without a finished run, runs of
different settings in one study, values that are no measurement, broken plans, and ``run`` without a GPU.

Studies are written as the runner writes them (``variability.json`` and one ``ThroughputRun`` per GPU and
repetition), then, where a case needs it, one value edited or one run folder copied in from another study. Each
``report`` case has a study of its own: the report writes its CSV files into the folder.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from tests.study import StudyCase
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.results.files import write_json_atomic
from trainbench.results.records import BatchResult, Status

NAME = "NVIDIA H100 80GB HBM3"
RATES = {0: 1000.0, 1: 1010.0, 2: 990.0, 3: 760.0}  # GPU 3 is the slow one


def _header(**changes: Any) -> dict[str, Any]:
    model = {"framework": "torch", "precision": "bf16", "image_size": 224, "num_classes": 1000, "device": "cuda",
             "compile": False, "seed": 0}
    header = {"framework": "torch", "precision": "bf16", "image_size": 224, "data": "synthetic", "device": "cuda",
              "model": model, "warmup_steps": 10, "timed_steps": 50, "sync_every_step": False,
              "telemetry_interval_s": 0.1,
              "launch": {"processes_per_node": 1, "nodes": 1, "rdzv_endpoint": None, "torchrun": False}}
    for key, value in changes.items():
        if key.startswith("model."):
            header["model"] = {**model, key[len("model."):]: value}
        else:
            header[key] = value
    return header


def _values(gpu: int, repetition: int, batch: int) -> dict[str, Any]:
    rate = RATES[gpu] * (1 + 0.01 * repetition) * (1.1 if batch == 128 else 1.0)
    power = 600.0 + 10 * gpu
    return {"samples_per_sec": rate, "sm_clock_median_mhz": 1980.0 - 100 * (gpu == 3), "mean_power_w": power,
            "temperature_max_c": 60.0 + gpu, "joules_per_sample": power / rate, "window_s": 5.0}


def _study(folder: Path, gpus: int = 4, repetitions: int = 2, batches: tuple[int, ...] = (64, 128),
           skip: tuple[tuple[int, int], ...] = (), **header: Any) -> Path:
    """A finished study: every (GPU, repetition) but those in ``skip``, each with every batch size."""
    folder.mkdir(parents=True)
    write_json_atomic(folder / "variability.json", {
        "host": "node01", "gpus": [{"index": i, "uuid": f"GPU-{i:04d}", "name": NAME} for i in range(gpus)],
        "repetitions": repetitions, "parallel": False, "outlier_threshold": 0.1, "batch_sizes": list(batches),
        "config": {"model": _header(**header)["model"]}})
    for gpu in range(gpus):
        for repetition in range(repetitions):
            if (gpu, repetition) not in skip:
                _run(folder / f"gpu{gpu}_rep{repetition}", gpu, repetition, batches, **header)
    return folder


def _run(run_dir: Path, gpu: int, repetition: int, batches: tuple[int, ...], **header: Any) -> None:
    run_dir.mkdir()
    write_json_atomic(run_dir / "env.json", {"hostname": "node01", "cuda_visible_devices": f"GPU-{gpu:04d}"})
    store = ThroughputRun(run_dir, _header(**header))
    for batch in batches:
        store.add(BatchResult(batch, Status.OK, None, _values(gpu, repetition, batch)), (0.5,), (0.1, 0.1, 0.1))


def _edit(run_dir: Path, index: int, field: str, value: Any) -> None:
    path = run_dir / "summary.json"
    data = json.loads(path.read_text())
    data["results"][index][field] = value
    path.write_text(json.dumps(data, indent=2))


def _edit_header(run_dir: Path, key: str, value: Any) -> None:
    path = run_dir / "summary.json"
    data = json.loads(path.read_text())
    if "." in key:
        outer, inner = key.split(".")
        data[outer][inner] = value
    else:
        data[key] = value
    path.write_text(json.dumps(data, indent=2))


def build(world: Path) -> None:
    _study(world / "good")
    _study(world / "gpu3_never_ran", skip=((3, 0), (3, 1)))
    (_study(world / "gpu3_killed", skip=((3, 0), (3, 1))) / "gpu3_rep0").mkdir()  # killed before its summary
    nothing = _study(world / "nothing_finished", skip=tuple((g, r) for g in range(4) for r in range(2)))
    (nothing / "gpu0_rep0").mkdir()
    partial = _study(world / "gpu2_no_128", skip=((2, 0), (2, 1)))
    for repetition in range(2):
        _run(partial / f"gpu2_rep{repetition}", 2, repetition, (64,))  # killed before batch 128
    _edit_header(_study(world / "mixed_precision") / "gpu1_rep0", "precision", "fp32")
    _edit_header(_study(world / "mixed_steps") / "gpu3_rep1", "timed_steps", 500)
    _edit_header(_study(world / "mixed_classes") / "gpu2_rep0", "model.num_classes", 10)
    mixed_copy = _study(world / "copied_in", skip=((1, 1),))
    other = _study(world / "other_study", gpus=2, image_size=128, **{"model.image_size": 128})
    shutil.copytree(other / "gpu1_rep1", mixed_copy / "gpu1_rep1")  # a run of another study copied in
    _edit(_study(world / "nan_rate") / "gpu2_rep1", 0, "samples_per_sec", math.nan)
    _edit(_study(world / "inf_rate") / "gpu0_rep0", 1, "samples_per_sec", math.inf)
    _edit(_study(world / "negative_power") / "gpu1_rep0", 0, "mean_power_w", -600.0)
    _edit(_study(world / "text_rate") / "gpu3_rep0", 0, "samples_per_sec", "fast")
    all_invalid = _study(world / "gpu1_all_invalid")
    for repetition in range(2):
        for index in range(2):
            _edit(all_invalid / f"gpu1_rep{repetition}", index, "samples_per_sec", -1.0)
    _study(world / "negative_index")
    plan = json.loads((world / "negative_index" / "variability.json").read_text())
    plan["gpus"][0]["index"] = -1
    (world / "negative_index" / "variability.json").write_text(json.dumps(plan))
    (world / "not_a_study").mkdir()
    (world / "out").mkdir()


def _report(*args: str) -> tuple[str, ...]:
    return ("variability", "report", *args)


TINY_CPU_RUN = ("--framework", "torch", "--batch-sizes", "2", "--image-size", "64", "--warmup", "1", "--steps", "1",
                "--repetitions", "1", "--telemetry-interval", "0")
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}

CASES: list[StudyCase] = [
    StudyCase("a whole study: the slow GPU is the outlier", _report("{w}/good"),
              ("   3  " + NAME, "OUTLIER", "across GPUs' medians (n=4)"), absent=("no finished run", "invalid"),
              exit=0, writes=True, kind="silent-wrong"),
    # GPUs without runs: named, never dropped silently
    StudyCase("a GPU that never ran is named", _report("{w}/gpu3_never_ran"),
              (f"GPU 3 ({NAME}): no finished run (none of its 2 run folders exists); left out of every figure",
               "across GPUs' medians (n=3)"), exit=0, writes=True, kind="silent-wrong"),
    StudyCase("a GPU killed before its summary is named", _report("{w}/gpu3_killed"),
              (f"GPU 3 ({NAME}): no finished run (1 of its 2 run folders exist, none with a summary.json)",),
              exit=0, writes=True, kind="silent-wrong"),
    StudyCase("a study with nothing finished names every GPU", _report("{w}/nothing_finished"),
              ("no result in this variability folder", "GPU 0 (", "GPU 3 ("), exit=0, writes=True,
              kind="silent-wrong"),
    StudyCase("a GPU missing at one batch size is named there", _report("{w}/gpu2_no_128"),
              ("   2  no result at batch 128 (left out of its figures)",), absent=("no finished run",), exit=0,
              writes=True, kind="silent-wrong"),
    # runs of different settings: refused, naming the setting and the runs
    StudyCase("one run in another precision", _report("{w}/mixed_precision"),
              ("{w}/mixed_precision", "its runs used different settings",
               "precision is 'bf16' in gpu0_rep0 but 'fp32' in gpu1_rep0"), kind="silent-wrong"),
    StudyCase("one run with ten times the steps", _report("{w}/mixed_steps"),
              ("timed_steps is 50 in gpu0_rep0 but 500 in gpu3_rep1",), kind="silent-wrong"),
    StudyCase("one run with 10 classes", _report("{w}/mixed_classes"),
              ("model.num_classes is 1000 in gpu0_rep0 but 10 in gpu2_rep0",), kind="silent-wrong"),
    StudyCase("a run of another study copied in", _report("{w}/copied_in"),
              ("{w}/copied_in", "image_size is 224 in gpu0_rep0 but 128 in gpu1_rep1"), kind="silent-wrong"),
    StudyCase("a mixed study given a threshold is still refused", _report("{w}/mixed_precision",
                                                                          "--outlier-threshold", "0.05"),
              ("precision is 'bf16' in gpu0_rep0",), kind="silent-wrong"),
    # values that are no measurement: shown as invalid, counted, left out
    StudyCase("a NaN rate is invalid, counted and left out", _report("{w}/nan_rate"),
              ("(1 invalid)", "1 invalid result left out of every median and spread:",
               "{w}/nan_rate/gpu2_rep1/summary.json: results[0].samples_per_sec is nan",
               "across all runs (n=7)"), absent=("images/s, cv nan", " nan images/s"),
              exit=0, writes=True, kind="silent-wrong"),
    StudyCase("an infinite rate is invalid", _report("{w}/inf_rate"),
              ("results[1].samples_per_sec is inf", "(1 invalid)"), absent=("inf images/s",), exit=0, writes=True,
              kind="silent-wrong"),
    StudyCase("a negative power makes the result invalid", _report("{w}/negative_power"),
              ("results[0].mean_power_w is -600.0", "(1 invalid)"),
              exit=0, writes=True, kind="silent-wrong"),
    StudyCase("a text rate is invalid", _report("{w}/text_rate"),
              ("results[0].samples_per_sec is 'fast'", "(1 invalid)"), exit=0, writes=True, kind="traceback"),
    StudyCase("a GPU whose every result is invalid keeps a row without values",
              _report("{w}/gpu1_all_invalid"),
              ("(2 invalid)", "4 invalid results left out", "across GPUs' medians (n=3)"), exit=0, writes=True,
              kind="silent-wrong"),
    # broken folders and options
    StudyCase("a plan with a negative GPU index", _report("{w}/negative_index"),
              ("{w}/negative_index/variability.json", "gpus[0] has no whole-number index"), kind="bad-file"),
    StudyCase("a folder that is not a study", _report("{w}/not_a_study"),
              ("{w}/not_a_study/variability.json", "not found"), kind="bad-file"),
    StudyCase("a study that does not exist", _report("{w}/absent"), ("{w}/absent",), kind="bad-file"),
    StudyCase("a threshold of 0", _report("{w}/good", "--outlier-threshold", "0"), ("--outlier-threshold",),
              kind="bad-option"),
    StudyCase("a threshold of 1", _report("{w}/good", "--outlier-threshold", "1"), ("--outlier-threshold",),
              kind="bad-option"),
    StudyCase("a threshold of nan", _report("{w}/good", "--outlier-threshold", "nan"), ("--outlier-threshold",),
              kind="bad-option"),
    # run: without a GPU it stops unless --device cpu asks for the plumbing check
    StudyCase("run with no GPU visible stops and says what would run",
              ("variability", "run", "--output", "{w}/refused", *TINY_CPU_RUN),
              ("variability: no GPU to compare", "--device cpu checks the plumbing on the CPU"), env=NO_GPU,
              kind="does-nothing"),
    StudyCase("run --device cuda with no GPU visible",
              ("variability", "run", "--device", "cuda", "--output", "{w}/refused", *TINY_CPU_RUN),
              ("cuda",), env=NO_GPU, kind="does-nothing"),
    StudyCase("run with no repetition", ("variability", "run", "--device", "cpu", "--repetitions", "0",
                                         "--output", "{w}/refused"), ("--repetitions",), env=NO_GPU,
              kind="bad-option"),
    # run --device cpu without a GPU (the plumbing on a CPU stand-in, its lines and its folder): a real run, so it is
    # test_variability_e2e.py's test_device_cpu_without_a_gpu_runs_the_plumbing_on_a_cpu_stand_in
]
