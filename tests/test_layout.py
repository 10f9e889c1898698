"""The run-folder layout and the run header: every run file named in results.layout only; throughput runs and
profiles write one header shape, read back the same; older summaries still read, in today's shape."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from trainbench.bench.sweep import run_header
from trainbench.bench.throughput_run import ThroughputRun
from trainbench.config import BenchConfig, LaunchConfig, ModelConfig, ProfileConfig, to_dict
from trainbench.profile.run import ProfileRun
from trainbench.report.found import RunRecord
from trainbench.report.sections.common import run_label
from trainbench.results import layout
from trainbench.results.header import WORKLOAD, Profiling, RunHeader, Timing
from trainbench.results.records import BatchResult, Status
from trainbench.results.store import read_summary

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "source" / "trainbench"
RESULTS = REPO / "benchmarks" / "results"
MODEL = ModelConfig(framework="torch", precision="bf16", device="cpu", image_size=64, num_classes=10)
CONFIG = BenchConfig(model=MODEL, batch_size=4, warmup_steps=2, steps=5, windows=3, data=None,
                     launch=LaunchConfig(processes_per_node=2), telemetry_interval_s=0.5)
WINDOW = ProfileConfig(tool="nsys", start_iteration=2, iterations=3)
# Names that only results.layout spells: the run files, the unfinished and finished markers, the worker files.
LAYOUT_NAMES = frozenset({*layout.RUN_FILES, *layout.UNFINISHED_MARKERS, layout.FINISHED, layout.LOGS,
                          layout.PROFILE_FOLDER_PREFIX, layout.WORKER_CONFIG, layout.WORKER_RESULT,
                          layout.NSYS_TIMELINE})


def _spelled(path: Path, root: Path = REPO) -> list[str]:
    """``file:line: 'name'`` for each string in ``path``'s code (an f-string's fixed parts included) that is one of
    the layout's names; docstrings and messages that mention a name in a sentence are not such a string."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [f"{path.relative_to(root)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and node.value in LAYOUT_NAMES]


def test_no_module_but_the_layout_spells_a_run_file_name() -> None:
    modules = [path for path in sorted(PACKAGE.rglob("*.py")) if path != PACKAGE / "results" / "layout.py"]
    assert len(modules) > 100
    found = [line for path in modules for line in _spelled(path)]
    assert found == []


def test_the_scan_finds_a_literal_and_an_f_string_part(tmp_path: Path) -> None:
    module = tmp_path / "x.py"
    module.write_text('"""A summary.json docstring."""\npath = root / "summary.json"\nname = f"{stem}_ret_{code}"\n'
                      'note = "see summary.json"\n')
    assert _spelled(module, tmp_path) == ["x.py:2: 'summary.json'", "x.py:3: '_ret_'"]


def test_the_unfinished_markers_are_the_campaign_runner_s(tmp_path: Path) -> None:
    for marker in ("_inprogress", "_refused", "_abandoned-2"):
        assert layout.in_unfinished_run(tmp_path / f"run_0_x{marker}" / "summary.json", tmp_path)
    assert not layout.in_unfinished_run(tmp_path / "run_0_x_ret_0" / "summary.json", tmp_path)
    assert not layout.in_unfinished_run(tmp_path / "my_inprogress_runs" / "summary.json", tmp_path)
    assert layout.worker_file(tmp_path, 8, layout.WORKER_CONFIG) == tmp_path / "logs" / "batch_8.config.json"
    assert layout.profile_folder("ncu") == "profiled_data_ncu"


# --- the header -------------------------------------------------------------------------------------------------


def _throughput(tmp_path: Path) -> Path:
    store = ThroughputRun(tmp_path, run_header(CONFIG).to_json())
    store.add(BatchResult(4, Status.OK, None, {"samples_per_sec": 10.0}), [0.1, 0.1], [0.4] * 5)
    return tmp_path / layout.SUMMARY


def _profile(tmp_path: Path) -> Path:
    profiling = Profiling("nsys", to_dict(WINDOW), {"name": "H100", "compute_capability": [9, 0]}, None, None)
    store = ProfileRun(tmp_path, run_header(CONFIG, profiling).to_json(), ("kernels",))
    store.add(BatchResult(4, Status.OK, None, {"profiler": "nsys", "kernels": 3}))
    return tmp_path / layout.PROFILE


def test_a_throughput_run_s_header_reads_back_as_written(tmp_path: Path) -> None:
    header = RunHeader.read(read_summary(_throughput(tmp_path)).header)
    assert header == run_header(CONFIG)
    assert header.timing == Timing(warmup_steps=2, timed_steps=5, windows=3, sync_every_step=False,
                                   telemetry_interval_s=0.5)
    assert (header.workload, header.framework, header.precision, header.device, header.image_size, header.data) == (
        WORKLOAD, "torch", "bf16", "cpu", 64, "synthetic")
    assert header.model == to_dict(MODEL) and header.launch == to_dict(CONFIG.launch) and header.profiling is None


def test_a_profile_s_header_has_the_throughput_run_s_shape(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    (tmp_path / "p").mkdir()
    throughput = json.loads(_throughput(tmp_path / "t").read_text())
    profile = json.loads(_profile(tmp_path / "p").read_text())
    shared = ("workload", "framework", "precision", "image_size", "data", "device", "model", "launch")
    assert {key: profile[key] for key in shared} == {key: throughput[key] for key in shared}
    assert profile["framework"] == profile["model"]["framework"] == "torch"  # at the top level, as in summary.json
    header = RunHeader.read(read_summary(tmp_path / "p" / layout.PROFILE).header)
    assert header.profiling == Profiling("nsys", to_dict(WINDOW), {"name": "H100", "compute_capability": [9, 0]})
    assert header.timing is None and "timed_steps" not in profile  # the profiler's window replaces the timing


def test_a_format_1_profile_reads_in_today_s_shape() -> None:
    path = RESULTS / "h100_profile" / "nsys_profile.json"
    raw = json.loads(path.read_text())
    assert "framework" not in raw and "workload" not in raw  # written before the header was one
    summary = read_summary(path)
    header = RunHeader.read(summary.header)
    assert (header.workload, header.framework, header.precision, header.device, header.image_size) == (
        "resnet50", "torch", "fp32", "cuda", 224)
    assert header.data is None and header.launch is None  # not recorded, and not made up
    assert header.profiling is not None and header.profiling.profiler == "nsys"
    assert summary.header["framework"] == "torch" and summary.header["model"] == raw["model"]
    assert "data" not in summary.header and "launch" not in summary.header
    label = run_label(RunRecord(path.parent, summary.header, [r.to_row() for r in summary.results]))
    assert label == "nsys profile: torch fp32 on cuda 224px synthetic data"


@pytest.mark.parametrize("path", ["h100_torch/throughput_torch_fp32_cuda/summary.json",
                                  "cpu_2core/extrap_model/summary.json"])
def test_older_throughput_summaries_keep_every_key(path: str) -> None:
    raw = json.loads((RESULTS / path).read_text())
    header = read_summary(RESULTS / path).header
    kept = {key: value for key, value in raw.items() if key not in ("format", "results")}
    assert {key: header[key] for key in kept} == kept
    assert header["workload"] == "resnet50" and "windows" not in header
    timing = RunHeader.read(header).timing
    assert timing is not None and timing.timed_steps == raw["timed_steps"] and timing.windows is None


def test_a_header_value_of_the_wrong_type_is_kept_for_its_reader_to_name() -> None:
    odd = {"framework": "torch", "model": "resnet", "launch": "two", "image_size": "big", "note": 1}
    header = RunHeader.read(odd)
    assert header.model == {} and header.launch is None and header.image_size == "big"
    # Read as ResNet-50's, at the size every run had before sizes were written (results.header.BEFORE_SIZES).
    assert header.to_json() == {"workload": "resnet50", "sample_unit": "image", "size": "full", **odd}
