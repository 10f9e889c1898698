"""The profiled window: exactly iterations [start, start + count), for the CUDA profiler API, NVTX ranges and the
frameworks' own profilers (these run for real, on the CPU)."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli
from trainbench.config import ProfileConfig
from trainbench.errors import UsageError
from trainbench.profile.window import CaptureHooks, WindowRecorder, profile_window

TINY = ["--device", "cpu", "--image-size", "32", "--num-classes", "10"]


class CallLog:
    """A runner and a Markers at once, so the order of steps, synchronisations and profiler calls is one list."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def step(self) -> None:
        self.calls.append("step")

    def sync(self) -> None:
        self.calls.append("sync")

    def start_capture(self) -> None:
        self.calls.append("start")

    def stop_capture(self) -> None:
        self.calls.append("stop")

    def push_range(self, name: str) -> None:
        self.calls.append(f"push {name}")

    def pop_range(self) -> None:
        self.calls.append("pop")


def test_capture_covers_exactly_the_window_after_a_synchronisation() -> None:
    log = CallLog()
    recorder = WindowRecorder()
    profile_window(log, ProfileConfig("ncu", start_iteration=2, iterations=2), [recorder, CaptureHooks(log)])
    assert recorder.iterations == [2, 3]
    assert log.calls == [
        "push epoch:0", "push step:0", "step", "pop",
        "push step:1", "step", "pop",
        "sync",  # the unprofiled iterations' work is done before the capture starts
        "start", "push step:2", "step", "pop",
        "push step:3", "step", "pop",
        "sync", "stop", "pop",  # the window's work is done before the capture stops; then the epoch closes
    ]


def test_window_can_start_at_the_first_iteration() -> None:
    log = CallLog()
    recorder = WindowRecorder()
    profile_window(log, ProfileConfig("nsys", start_iteration=0, iterations=1), [recorder, CaptureHooks(log)])
    assert recorder.iterations == [0]
    assert log.calls.index("start") < log.calls.index("push step:0") < log.calls.index("stop")


@pytest.mark.parametrize(("field", "value"), [("iterations", 0), ("start_iteration", -1), ("tool", "vtune")])
def test_bad_window_is_a_usage_error(field: str, value: object) -> None:
    settings = {"tool": "ncu", "start_iteration": 1, "iterations": 5, field: value}
    with pytest.raises(UsageError):
        ProfileConfig(**settings)


def profiler_steps(trace: Path) -> list[int]:
    events = json.loads(trace.read_text())["traceEvents"]
    return sorted(int(e["name"].split("#")[1]) for e in events if e.get("name", "").startswith("ProfilerStep#"))


@pytest.mark.slow
def test_torch_profiler_records_exactly_the_asked_iterations(tmp_path: Path) -> None:
    result = run_cli("profile", "torch", *TINY, "--batch-sizes", "2,3", "--start-iteration", "2", "--iterations", "3",
                     "--output", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    assert run_dir == tmp_path / "profiled_data_torch"
    for batch in (2, 3):
        assert profiler_steps(run_dir / f"batch_{batch}" / "trace.json") == [2, 3, 4]
        with open(run_dir / f"batch_{batch}" / "operators.csv", newline="") as table:
            operators = {row["name"]: row for row in csv.DictReader(table)}
        # 53 convolutions per forward pass of ResNet-50, three profiled iterations.
        assert int(operators["aten::convolution"]["calls"]) == 53 * 3
    record = json.loads((run_dir / "profile.json").read_text())
    assert [r["profiled_iterations"] for r in record["results"]] == [[2, 3, 4], [2, 3, 4]]
    with open(run_dir / "summary.csv", newline="") as rows:
        summary = list(csv.DictReader(rows))
    assert [(row["batch_size"], row["status"]) for row in summary] == [("2", "ok"), ("3", "ok")]
    assert summary[0]["trace"] == "batch_2/trace.json" and summary[0]["top_operator"].startswith("aten::")
    assert not (run_dir / "summary.png").exists()  # nothing to draw against batch size


def xplane_steps(log_dir: Path) -> list[int]:
    from tensorflow.tsl.profiler.protobuf import xplane_pb2

    (path,) = log_dir.glob("plugins/profile/*/*.xplane.pb")
    space = xplane_pb2.XSpace.FromString(path.read_bytes())
    steps = []
    for plane in space.planes:
        names = {key: meta.name for key, meta in plane.event_metadata.items()}
        stats = {key: meta.name for key, meta in plane.stat_metadata.items()}
        for line in plane.lines:
            for event in line.events:
                if names.get(event.metadata_id) == "train":
                    steps += [s.int64_value for s in event.stats if stats.get(s.metadata_id) == "step_num"]
    return sorted(steps)


@pytest.mark.slow
def test_tf_profiler_through_the_script_traces_exactly_the_window(tmp_path: Path) -> None:
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "TF_CPP_MIN_LOG_LEVEL": "2", "BATCH_SIZES": "2",
           "OUTPUT": str(tmp_path), "PYTHON": sys.executable, "EXTRA_ARGS": " ".join(TINY)}
    result = subprocess.run(["bash", "scripts/measure_compute_util.sh", "tf", "1", "2"], cwd=REPO, env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = tmp_path / "profiled_data_tf"
    assert xplane_steps(run_dir / "batch_2") == [1, 2]
    record = json.loads((run_dir / "profile.json").read_text())
    assert record["model"]["framework"] == "tf" and record["results"][0]["profiled_iterations"] == [1, 2]


def test_framework_profiler_must_match_the_engine(tmp_path: Path) -> None:
    result = run_cli("profile", "tf", "--framework", "torch", *TINY, "--output", str(tmp_path))
    assert_one_line_error(result, "--framework tf")
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize("args", [["ncu", "x"], ["ncu", "1", "-5"], []])
def test_script_refuses_bad_arguments(args: list[str]) -> None:
    result = subprocess.run(["bash", "scripts/measure_compute_util.sh", *args], cwd=REPO, capture_output=True,
                            text=True, timeout=60)
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1


def test_ctypes_markers_use_the_loaded_cuda_runtime_and_report_its_errors() -> None:
    """TensorFlow's path to the CUDA profiler API and NVTX, on the real libraries (torch has loaded its runtime)."""
    import torch

    from trainbench.profile.markers import CudaRuntimeMarkers, loaded_library

    loaded = loaded_library("libcudart")
    if loaded is None or torch.cuda.is_available():
        pytest.skip("needs a CUDA build of torch on a machine without a GPU")
    markers = CudaRuntimeMarkers()
    assert markers._cudart._name == loaded
    assert markers._nvtx is not None  # torch's nvidia-nvtx dependency: libnvtx3interop
    markers.push_range("step:0")  # without a profiler attached NVTX calls are no-ops, but they must resolve
    markers.pop_range()
    with pytest.raises(RuntimeError, match=r"cudaProfilerStart returned CUDA error \d+"):
        markers.start_capture()  # no GPU here: the runtime's own error code, not a crash


def test_hopper_metric_set_against_the_h100s_own_listing() -> None:
    """`ncu --query-metrics` as taken on an H100 (benchmarks/results/h100_profile): every metric chosen for 9.0
    exists there, and the A100's FP16 pipe metric, which would fail the run, does not."""
    import gzip

    from trainbench.profile.ncu import filter_by_query, known_bases, metric_set

    listing = REPO / "benchmarks" / "results" / "h100_profile" / "ncu_query_metrics.txt.gz"
    known = known_bases(gzip.decompress(listing.read_bytes()).decode())
    assert len(known) > 3000
    kept, dropped = filter_by_query(metric_set((9, 0)), known)
    assert dropped == [] and len(kept) == 9
    assert filter_by_query(metric_set((8, 0)), known)[1] == [
        "sm__inst_executed_pipe_fp16.avg.pct_of_peak_sustained_elapsed"]
