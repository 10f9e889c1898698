"""``trainbench model`` under bad, odd and hostile input: values that are no measurement, runs that differ in a
setting, constant and degenerate fits, absurd and conflicting --predict and --leave-out points.

Runs are written by the suite's own writer (``ThroughputRun``) and then, where a case needs it, one value of
summary.json is edited as a hostile or unlucky file would hold it (NaN, Infinity, a negative rate, a text).
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

BATCHES = (2, 4, 8, 16, 32)


def _step(batch: int) -> float:
    return 0.02 + 0.002 * batch


def write_run(folder: Path, step: Any = _step, num_classes: int = 1000, timed_steps: int = 20,
              device: str = "cpu", gpu: str | None = None, batches: tuple[int, ...] = BATCHES) -> Path:
    """A throughput run folder as the suite writes it: three windows per batch size, a small spread."""
    header = {"framework": "torch", "precision": "fp32", "image_size": 64, "data": "synthetic", "device": device,
              "model": {"framework": "torch", "precision": "fp32", "image_size": 64, "num_classes": num_classes,
                        "device": device, "compile": False, "seed": 0},
              "warmup_steps": 2, "timed_steps": timed_steps, "sync_every_step": False,
              "launch": {"processes_per_node": 1, "nodes": 1, "rdzv_endpoint": None, "torchrun": False}}
    (folder / "logs").mkdir(parents=True)
    store = ThroughputRun(folder, header)
    for batch in batches:
        windows = [batch / (step(batch) * factor) for factor in (0.99, 1.0, 1.01)]
        store.add(BatchResult(batch, Status.OK, None, {"samples_per_sec": sum(windows) / 3,
                                                       "window_samples_per_sec": windows, "world_size": 1}))
    store.add(BatchResult.failed(64, Status.OOM, "out of memory"))
    gpus = [{"index": 0, "name": gpu}] if gpu else []
    write_json_atomic(folder / "env.json", {"cpu_model": "Test CPU", "gpu": {"gpus": gpus}})
    return folder


def _edit(folder: Path, index: int, field: str, value: Any) -> None:
    """Set results[index].field in summary.json as raw JSON text (NaN and Infinity included)."""
    path = folder / "summary.json"
    data = json.loads(path.read_text())
    data["results"][index][field] = value
    path.write_text(json.dumps(data, indent=2))


def _edited(world: Path, name: str, field: str, value: Any, index: int = 0) -> None:
    folder = write_run(world / name / "run")
    _edit(folder, index, field, value)


def _profile(folder: Path, step_ms: list[Any]) -> None:
    """An nsys profile folder whose batch size 8 has the given step GPU times."""
    folder.mkdir(parents=True)
    results = []
    for batch in BATCHES:
        times = step_ms if batch == 8 else [batch * 1.0, batch * 1.02]
        kernels = [{"name": "gemm", "total_ns": batch * 1e6, "instances": 3}]
        write_json_atomic(folder / f"batch_{batch}.timeline.json", {"step_gpu_ms": times, "top_kernels": kernels})
        results.append(BatchResult(batch, Status.OK, None, {"gpu_busy_fraction": 0.5}).to_row())
    write_json_atomic(folder / "profile.json", {"profiler": "nsys", "model": {
        "framework": "torch", "precision": "bf16", "device": "cuda", "image_size": 224}, "results": results})


def build(world: Path) -> None:
    write_run(world / "good" / "run")
    _edited(world, "nan", "samples_per_sec", math.nan)
    _edited(world, "inf", "samples_per_sec", math.inf)
    _edited(world, "negative", "window_samples_per_sec", [-50.0, -50.0, -50.0], index=1)
    _edited(world, "text", "samples_per_sec", "fast", index=2)
    _edited(world, "zero", "window_samples_per_sec", [0, 0, 0], index=3)
    _edited(world, "joules", "joules_per_sample", -1.0)
    _edited(world, "world", "world_size", -4)
    # every result of the run invalid: nothing is left to model
    folder = write_run(world / "all_bad" / "run")
    for index in range(len(BATCHES)):
        _edit(folder, index, "samples_per_sec", -1.0)
    folder = write_run(world / "launch_text" / "run")
    data = json.loads((folder / "summary.json").read_text())
    del data["results"][0]["world_size"]
    data["launch"]["processes_per_node"] = "x"
    (folder / "summary.json").write_text(json.dumps(data))
    write_run(world / "classes" / "run_10", lambda b: 0.01 + 0.001 * b, num_classes=10)
    write_run(world / "classes" / "run_1000", num_classes=1000)
    write_run(world / "steps" / "run_20", timed_steps=20)
    write_run(world / "steps" / "run_50", timed_steps=50, batches=(2, 4, 8))  # other points: own Extra-P run
    write_run(world / "gpus" / "a", device="cuda", gpu="GPU A")
    write_run(world / "gpus" / "b", lambda b: 0.01 + 0.001 * b, device="cuda", gpu="GPU B")
    write_run(world / "same_twice" / "a")
    shutil.copytree(world / "same_twice" / "a", world / "same_twice" / "b")  # a copy: the same settings, one model
    write_run(world / "constant" / "run", lambda b: 0.25)
    write_run(world / "two_points" / "run", batches=(2, 4))
    for name, key, value in (("model_text", "model", "resnet"), ("size_text", "image_size", "big")):
        folder = write_run(world / name / "run")
        data = json.loads((folder / "summary.json").read_text())
        data[key] = value
        (folder / "summary.json").write_text(json.dumps(data))
    (write_run(world / "env_garbage" / "run") / "env.json").write_bytes(b"\xff\x00 not json")
    _profile(world / "nsys_no_timeline" / "profiled_data_nsys", [8.0, 8.1])
    (world / "nsys_no_timeline" / "profiled_data_nsys" / "batch_8.timeline.json").unlink()
    _profile(world / "nsys_negative" / "profiled_data_nsys", [8.0, -3.0])
    _profile(world / "nsys_text" / "profiled_data_nsys", [8.0, "slow"])
    (world / "out").mkdir()


def _model(*args: str) -> tuple[str, ...]:
    return ("model", *args)


OUT = ("--output", "{w}/out")
REFUSED = ("--output", "{w}/refused")  # a refusal makes not even this folder

CASES: list[StudyCase] = [
    # values that are no measurement: left out, counted, the first named with its file and field
    StudyCase("nan rate is left out and named", _model("{w}/nan", *OUT),
              ("1 result left out", "{w}/nan/run/summary.json: results[0].samples_per_sec is nan"),
              exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("infinite rate is left out and named", _model("{w}/inf", *OUT),
              ("1 result left out", "results[0].samples_per_sec is inf"), exit=0, writes=True, kind="silent-wrong",
              slow=True),
    StudyCase("negative window rates are left out, never a negative step time", _model("{w}/negative", *OUT),
              ("1 result left out", "results[1].window_samples_per_sec is [-50.0, -50.0, -50.0]",
               "points per parameter: batch_size: 4 (2-32)"), exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("a text rate is left out and named", _model("{w}/text", *OUT),
              ("1 result left out", "results[2].samples_per_sec is 'fast'"), exit=0, writes=True,
              kind="silent-wrong", slow=True),
    StudyCase("a rate of 0 gives no step time: left out", _model("{w}/zero", *OUT),
              ("1 result left out", "results[3].window_samples_per_sec[0] is 0, not a finite positive number"),
              exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("a negative energy is left out", _model("{w}/joules", *OUT),
              ("1 result left out", "results[0].joules_per_sample is -1.0"), exit=0, writes=True,
              kind="silent-wrong", slow=True),
    StudyCase("a negative world size is left out, not replaced", _model("{w}/world", *OUT),
              ("1 result left out", "results[0].world_size is -4, not a positive whole number"), exit=0,
              writes=True, kind="silent-wrong", slow=True),
    StudyCase("a text process count in the header is left out", _model("{w}/launch_text", *OUT),
              ("1 result left out", "launch.processes_per_node is 'x'"), exit=0, writes=True,
              kind="traceback", slow=True),
    StudyCase("all results invalid: one line naming the count and the first", _model("{w}/all_bad", *REFUSED),
              ("{w}/all_bad", "no measured batch size", "5 results left out", "results[0].samples_per_sec is -1.0"),
              kind="silent-wrong"),
    StudyCase("a negative nsys step GPU time is left out and named", _model("{w}/nsys_negative", *OUT),
              ("1 result left out", "batch_8.timeline.json: step_gpu_ms[1] is -3.0"), exit=0, writes=True,
              kind="silent-wrong", slow=True),
    StudyCase("a text nsys step GPU time is left out and named", _model("{w}/nsys_text", *OUT),
              ("1 result left out", "step_gpu_ms[1] is 'slow'"), exit=0, writes=True, kind="silent-wrong",
              slow=True),
    StudyCase("a header whose model is a text", _model("{w}/model_text", *OUT), ("torch fp32 cpu synthetic",),
              exit=0, writes=True, kind="traceback", slow=True),
    StudyCase("a header whose image size is a text: every result left out", _model("{w}/size_text", *REFUSED),
              ("5 results left out", "image_size is 'big', not a positive whole number"), kind="traceback"),
    StudyCase("an env.json that is no JSON: still modelled", _model("{w}/env_garbage", *OUT), ("SMAPE",),
              exit=0, writes=True, kind="bad-input", slow=True),
    StudyCase("an nsys batch size without its timeline is left out and named", _model("{w}/nsys_no_timeline", *OUT),
              ("1 result left out", "batch_8.timeline.json: no GPU times to model (FileNotFoundError)"), exit=0,
              writes=True, kind="silent-wrong", slow=True),
    # runs that differ in a setting that is not a parameter: separate models, labelled by what differs
    StudyCase("10 and 1,000 classes are two models", _model("{w}/classes", *OUT),
              ("| num_classes=10\n", "| num_classes=1000\n"), exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("other timed steps and other points: two models", _model("{w}/steps", *OUT),
              ("| timed_steps=20\n", "| timed_steps=50\n"), exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("two GPU models are two models", _model("{w}/gpus", *OUT), ("| GPU=GPU A\n", "| GPU=GPU B\n"),
              exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("two runs with the same settings are one model", _model("{w}/same_twice", *OUT),
              ("30 values",), absent=("num_classes=", "timed_steps="), exit=0, writes=True,
              kind="silent-wrong", slow=True),
    # fit quality: never a made-up figure
    StudyCase("a constant model says so", _model("{w}/constant", *OUT),
              ("constant: no parameter explains the values",), absent=("adjusted R^2 1.0000", "nan", "-inf"),
              exit=0, writes=True, kind="silent-wrong", slow=True),
    StudyCase("two points: no -inf adjusted R^2", _model("{w}/two_points", *OUT),
              ("fewer than Extra-P's minimum",), absent=("-inf", "nan"), exit=0, writes=True,
              kind="silent-wrong", slow=True),
    # --predict
    StudyCase("--predict 1e300: beyond any run, refused", _model("{w}/good", "--predict", "batch_size=1e300",
                                                                *REFUSED),
              ("--predict", "'batch_size=1e300'", "from 1 to 16777216"), kind="warning"),
    StudyCase("--predict gpus=1e7: beyond any launch, refused",
              _model("{w}/good", "--param", "batch_size,gpus", "--predict", "batch_size=8,gpus=1e7", *REFUSED),
              ("--predict", "gpus must be a finite number from 1 to 1048576"), kind="warning"),
    StudyCase("--predict 1e-300 is refused", _model("{w}/good", "--predict", "batch_size=1e-300", *REFUSED),
              ("--predict", "from 1 to"), kind="warning"),
    StudyCase("--predict at the largest batch size: a number, extrapolated",
              _model("{w}/good", "--predict", "batch_size=16777216", *OUT),
              ("predicted at batch_size=1.678e+07", "extrapolated"), exit=0, writes=True, kind="warning",
              slow=True),
    StudyCase("--predict inf is refused", _model("{w}/good", "--predict", "batch_size=inf", *REFUSED),
              ("--predict", "must be a finite number"), kind="warning"),
    StudyCase("--predict nan is refused", _model("{w}/good", "--predict", "batch_size=nan", *REFUSED),
              ("--predict", "must be a finite number"), kind="warning"),
    StudyCase("--predict 0 is refused", _model("{w}/good", "--predict", "batch_size=0", *REFUSED),
              ("--predict", "from 1 to"), kind="bad-option"),
    StudyCase("--predict on a parameter not modelled", _model("{w}/good", "--predict", "gpus=4", *REFUSED),
              ("--predict gpus=4", "gpus is not a parameter of the model", "--param batch_size"),
              kind="does-nothing"),
    StudyCase("--predict naming one more parameter than modelled",
              _model("{w}/good", "--predict", "batch_size=64,image_size=128", *REFUSED),
              ("--predict batch_size=64,image_size=128", "image_size is not a parameter"), kind="does-nothing"),
    StudyCase("--predict missing a modelled parameter",
              _model("{w}/good", "--param", "batch_size,gpus", "--predict", "batch_size=64", *REFUSED),
              ("--predict batch_size=64", "missing gpus"), kind="does-nothing"),
    StudyCase("--predict with a repeated key", _model("{w}/good", "--predict", "batch_size=8,batch_size=16",
                                                      *REFUSED),
              ("--predict", "batch_size is given more than once"), kind="does-nothing"),
    StudyCase("--predict of the same point twice", _model("{w}/good", "--predict", "batch_size=8", "--predict",
                                                          "batch_size=8.0", *REFUSED),
              ("--predict batch_size=8 is given more than once",), kind="does-nothing"),
    StudyCase("--predict at a parameter measured at one value only",
              _model("{w}/good", "--param", "batch_size,gpus", "--predict", "batch_size=64,gpus=16", *OUT),
              ("not predicted at batch_size=64,gpus=16", "gpus=16 (measured at 1 only)"),
              absent=("predicted at batch_size=64, gpus=16",), exit=0, writes=True, kind="does-nothing", slow=True),
    StudyCase("--predict a word", _model("{w}/good", "--predict", "batch_size=big", *REFUSED),
              ("--predict", "'big' is not a number"), kind="bad-option"),
    # --leave-out
    StudyCase("--leave-out on a parameter not modelled", _model("{w}/good", "--leave-out", "gpus=1", *REFUSED),
              ("--leave-out gpus=1", "gpus is not a parameter of the model"), kind="does-nothing"),
    StudyCase("--leave-out with a repeated key", _model("{w}/good", "--leave-out", "batch_size=8,batch_size=4",
                                                        *REFUSED),
              ("--leave-out", "batch_size is given more than once"), kind="does-nothing"),
    StudyCase("--leave-out of the same point twice", _model("{w}/good", "--leave-out", "batch_size=8",
                                                            "--leave-out", "batch_size=8", *REFUSED),
              ("--leave-out batch_size=8 is given more than once",), kind="does-nothing"),
    StudyCase("--leave-out 1e300 is refused", _model("{w}/good", "--leave-out", "batch_size=1e300", *REFUSED),
              ("--leave-out", "from 1 to 16777216"), kind="warning"),
    StudyCase("--leave-out a point never measured", _model("{w}/good", "--leave-out", "batch_size=3", *REFUSED),
              ("--leave-out batch_size=3", "no measurement at that point"), kind="bad-option"),
    StudyCase("--leave-out inf is refused", _model("{w}/good", "--leave-out", "batch_size=inf", *REFUSED),
              ("--leave-out", "must be a finite number"), kind="warning"),
    StudyCase("--leave-out of all but one point: nothing checks it",
              _model("{w}/two_points", "--leave-out", "batch_size=4", *REFUSED),
              ("nothing to model",), kind="does-nothing"),
    StudyCase("--leave-out checks the model", _model("{w}/good", "--leave-out", "batch_size=32", *OUT),
              ("left out at batch_size=32: measured", "error"), exit=0, writes=True, kind="check", slow=True),
    # repeated options would replace each other silently
    StudyCase("--param twice", _model("{w}/good", "--param", "batch_size", "--param", "gpus", *REFUSED),
              ("--param", "more than once"), kind="does-nothing"),
    StudyCase("--output twice", _model("{w}/good", "--output", "{w}/a", "--output", "{w}/b"),
              ("--output", "more than once"), kind="does-nothing"),
    StudyCase("--metric twice", _model("{w}/good", "--metric", "step_time", "--metric", "samples_per_sec",
                                       *REFUSED), ("--metric", "more than once"), kind="does-nothing"),
    # the folders
    StudyCase("no such folder", _model("{w}/nowhere", *REFUSED), ("{w}/nowhere", "no such folder"),
              kind="bad-input"),
    StudyCase("a metric no run measured", _model("{w}/good", "--metric", "gpu_time", *REFUSED),
              ("nothing to model", "gpu_time"), kind="bad-input"),
]
