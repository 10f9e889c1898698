"""``trainbench profile`` and scripts/measure_compute_util.sh end to end, with stand-ins for nvidia-smi, ncu, nsys
and nvprof (tests/standins/) first on PATH: the real CLI, sweep and worker, the profilers' command lines as
recorded by the stand-ins, and the analysis of what the stand-ins wrote. There is no GPU here, so the workers run on
the CPU; the stand-ins record every call and write outputs with the real formats.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli, run_main

STANDINS = Path(__file__).resolve().parent / "standins"
TOOLS = ("nvidia-smi", "ncu", "nsys", "nvprof")
H100 = "NVIDIA H100 80GB HBM3, 9.0"
V100 = "Tesla V100-SXM2-16GB, 7.0"
TINY = ["--image-size", "32", "--num-classes", "10"]  # ResNet-50 at 32 px: the scripts' runs
# The runs whose point is the profiler's command line and what the CLI makes of its output, not the network.
TINY_NETWORK = ["--workload", "transformer", "--size", "tiny"]
SUFFIX = ".avg.pct_of_peak_sustained_elapsed"
WEIGHT = "gpc__cycles_elapsed.max"
CORE_METRICS = {  # the metric each core is read from on a Hopper profile
    "fma": "sm__inst_executed_pipe_fma" + SUFFIX,
    "fp16": "sm__inst_executed_pipe_fma_type_fp16" + SUFFIX,
    "tensor": "sm__pipe_tensor_cycles_active" + SUFFIX,
    "sfu": "sm__inst_executed_pipe_xu" + SUFFIX,
}


def standin_env(tmp_path: Path, tools: tuple[str, ...] = TOOLS, gpu: str = H100, keep_path: bool = True,
                **extra: str) -> dict[str, str]:
    """Environment with launchers for ``tools`` first on PATH (only them when ``keep_path`` is false); each
    launcher runs its stand-in with this interpreter, so the stand-ins need no python3 on PATH."""
    bin_dir, record = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir(exist_ok=True)
    record.mkdir(exist_ok=True)
    for tool in tools:
        launcher = bin_dir / tool
        launcher.write_text(f"#!{sys.executable}\nimport runpy, sys\nsys.path.insert(0, {str(STANDINS)!r})\n"
                            f"runpy.run_path({str(STANDINS / tool)!r}, run_name='__main__')\n")
        launcher.chmod(0o755)
    path = f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}" if keep_path else str(bin_dir)
    # The stand-in pynvml without a spec (no NVML) in the processes started: the profiled GPU is nvidia-smi's
    # stand-in's (query_gpu asks NVML first), also on a machine with a real GPU.
    python_path = os.pathsep.join(filter(None, [str(STANDINS / "nvml"), os.environ.get("PYTHONPATH")]))
    # One OpenMP thread: the tiny model gains nothing from more, and on busy shared cores their spin-waiting made
    # each worker several times slower.
    return {"PATH": path, "STANDIN_RECORD": str(record), "STANDIN_GPU": gpu, "CUDA_VISIBLE_DEVICES": "0",
            "OMP_NUM_THREADS": "1", "PYTHONPATH": python_path, **extra}


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """No NVML in this process either (run_main): the stand-in pynvml without a spec, STANDIN_NVML unset."""
    from tests.standins.nvml import pynvml as standin_nvml

    monkeypatch.delenv("STANDIN_NVML", raising=False)
    monkeypatch.setitem(sys.modules, "pynvml", standin_nvml.fresh())


def calls(tmp_path: Path, tool: str) -> list[list[str]]:
    """Every argv the stand-in ``tool`` was called with, in order."""
    record = tmp_path / "calls" / f"{tool}.jsonl"
    return [json.loads(line) for line in record.read_text().splitlines()] if record.exists() else []


def option(argv: list[str], name: str) -> str:
    assert argv.count(name) == 1, (name, argv)
    return argv[argv.index(name) + 1]


def run_script(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHON": sys.executable, "OUTPUT": str(tmp_path / "out"), "EXTRA_ARGS": " ".join(TINY),
                **env}
    return subprocess.run(["bash", "scripts/measure_compute_util.sh", *args], cwd=REPO, env=full_env,
                          capture_output=True, text=True, timeout=300)


def run_folder(result: subprocess.CompletedProcess[str]) -> Path:
    assert result.returncode == 0, result.stdout + result.stderr
    return Path(result.stdout.strip().splitlines()[-1])


def read_summary(run_dir: Path) -> list[dict[str, str]]:
    with open(run_dir / "summary.csv", newline="") as rows:
        return list(csv.DictReader(rows))


def assert_window(run_dir: Path, batch: int, start: int, count: int) -> None:
    """The worker's own record and log show the window [start, start + count)."""
    results = {r["batch_size"]: r for r in json.loads((run_dir / "profile.json").read_text())["results"]}
    assert results[batch]["profiled_iterations"] == list(range(start, start + count))
    log = (run_dir / "logs" / f"batch_{batch}.log").read_text()
    assert f"profile: window opens before iteration {start}\n" in log
    assert f"profile: window closed after iteration {start + count - 1}\n" in log


def weighted_by_hand(ncu_csv: Path, metric: str) -> float:
    """sum(value * gpc__cycles_elapsed.max) / sum(weight) over the launches, read with nothing but csv."""
    lines = [line for line in ncu_csv.read_text().splitlines() if not line.startswith("==")]
    rows = list(csv.DictReader(lines))
    values: dict[str, dict[str, float]] = {}
    for row in rows:
        values.setdefault(row["ID"], {})[row["Metric Name"]] = float(row["Metric Value"].replace(",", ""))
    assert len(values) == 3
    total = sum(launch[WEIGHT] for launch in values.values())
    return sum(launch[metric] * launch[WEIGHT] for launch in values.values()) / total


# --- ncu ------------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_ncu_script_on_hopper_profiles_the_window_and_summarises_each_batch(tmp_path: Path) -> None:
    env = standin_env(tmp_path, BATCH_SIZES="2 3")
    run_dir = run_folder(run_script(tmp_path, env, "ncu", "1", "2"))
    assert run_dir == tmp_path / "out" / "profiled_data_ncu"
    assert calls(tmp_path, "nvidia-smi") == [["--query-gpu=name,compute_cap", "--format=csv,noheader", "-i", "0"]]

    query, *profiled = calls(tmp_path, "ncu")
    assert query == ["--query-metrics"]
    assert len(profiled) == 2
    for batch, argv in zip((2, 3), profiled, strict=True):
        assert option(argv, "--profile-from-start") == "off"
        assert option(argv, "--target-processes") == "all"
        assert option(argv, "--print-units") == "base"
        assert option(argv, "--clock-control") == "base"  # ncu's own default, said explicitly
        assert "--csv" in argv
        assert option(argv, "--log-file") == str(run_dir / f"batch_{batch}.csv")
        metrics = option(argv, "--metrics").split(",")
        for name in ("sm__inst_executed_pipe_fma_type_fp16", "sm__pipe_tensor_cycles_active",
                     "sm__inst_executed_pipe_tensor_op_gmma", "sm__inst_executed_pipe_fma",
                     "sm__inst_executed_pipe_xu"):
            assert name + SUFFIX in metrics
        assert WEIGHT in metrics
        absent_on_hopper = ("sm__inst_executed_pipe_fp16.", "sm__inst_executed_pipe_tensor.")
        assert not any(m.startswith(absent_on_hopper) for m in metrics)
        # The worker comes right after ncu's options.
        worker = argv[argv.index(str(run_dir / f"batch_{batch}.csv")) + 1:]
        assert worker[:3] == [sys.executable, "-m", "trainbench.profile.worker"]
        assert worker[3] == str(run_dir / "logs" / f"batch_{batch}.config.json")

    profile = json.loads((run_dir / "profile.json").read_text())
    assert profile["gpu"] == {"name": "NVIDIA H100 80GB HBM3", "compute_capability": [9, 0]}
    assert profile["settings"] == option(profiled[0], "--metrics").split(",")
    assert profile["window"]["start_iteration"] == 1 and profile["window"]["iterations"] == 2
    # the throughput run's header shape: the model's settings at the top level too, data, launch, workload
    assert profile["framework"] == profile["model"]["framework"] and profile["device"] == profile["model"]["device"]
    assert profile["workload"] == "resnet50" and profile["data"] == "synthetic" and profile["launch"]["nodes"] == 1
    assert "timed_steps" not in profile  # the profiler's window replaces the timing
    summary = read_summary(run_dir)
    assert [row["batch_size"] for row in summary] == ["2", "3"]
    for row in summary:
        batch = int(row["batch_size"])
        assert row["status"] == "ok" and row["error"] == "", row
        assert row["kernels"] == "3"
        for core, metric in CORE_METRICS.items():
            assert row[f"{core}_metric"] == metric
            assert float(row[core]) == pytest.approx(weighted_by_hand(run_dir / f"batch_{batch}.csv", metric))
        assert_window(run_dir, batch, 1, 2)
    # By hand, batch 2 (the stand-in's values times 2/4), weights 1e6, 3e6, 1e6 cycles:
    # fma (10, 20, 40) -> 22 -> 11; fp16 (0, 5, 10) -> 5 -> 2.5; tensor cycles (50, 30, 0) -> 28 -> 14; xu -> 1.
    assert [float(summary[0][core]) for core in CORE_METRICS] == pytest.approx([11.0, 2.5, 14.0, 1.0])
    assert [float(summary[1][core]) for core in CORE_METRICS] == pytest.approx([16.5, 3.75, 21.0, 1.5])
    # Per kernel, the weighted means behind the row: the three launches are distinct kernels, largest weight first.
    with open(run_dir / "batch_2.kernels.csv", newline="") as table:
        kernels = list(csv.DictReader(table))
    assert len(kernels) == 3 and float(kernels[0]["weight_share"]) == pytest.approx(60.0)
    assert (run_dir / "summary.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")  # the four cores by batch size

    # A second run leaves the first alone and goes to the next free name. It is the CLI's own (in this process),
    # with --metrics and --clock-control: the metrics as given, asked for no query to filter them by.
    before = {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()}
    ncu_calls_before = len(calls(tmp_path, "ncu"))
    xu = "sm__inst_executed_pipe_xu" + SUFFIX
    second = run_folder(run_main("profile", "ncu", *TINY_NETWORK, "--batch-sizes", "2", "--iterations", "1",
                                 "--metrics", f"{WEIGHT}, {xu}", "--clock-control", "none",
                                 "--output", str(tmp_path / "out"), env=env))
    assert second == tmp_path / "out" / "profiled_data_ncu-1"
    assert {path.name: path.read_bytes() for path in run_dir.iterdir() if path.is_file()} == before
    (argv,) = calls(tmp_path, "ncu")[ncu_calls_before:]  # no --query-metrics: nothing to filter by
    assert option(argv, "--log-file") == str(second / "batch_2.csv")
    assert option(argv, "--metrics") == f"{WEIGHT},{xu}"
    assert option(argv, "--clock-control") == "none"
    assert json.loads((second / "profile.json").read_text())["clock_control"] == "none"
    (row,) = read_summary(second)
    assert row["status"] == "ok"
    assert (row["fma"], row["fp16"], row["tensor"]) == ("", "", "")  # not asked for: n/a, never 0
    assert float(row["sfu"]) == pytest.approx(1.0) and row["sfu_metric"] == xu
    assert_window(second, 2, 1, 1)


@pytest.mark.slow
def test_ncu_on_volta_asks_for_the_fp16_pipe_and_drops_a_metric_its_query_does_not_list(tmp_path: Path) -> None:
    """Volta's metric set (its own FP16 pipe), less a metric this ncu's --query-metrics does not list: one run."""
    hmma = "sm__inst_executed_pipe_tensor_op_hmma" + SUFFIX
    # Some ncu versions leave the weights out of their listing: those are kept all the same.
    env = standin_env(tmp_path, gpu=V100, STANDIN_NCU_LACKS="sm__inst_executed_pipe_tensor_op_hmma,gpc__cycles_elapsed")
    result = run_main("profile", "ncu", *TINY_NETWORK, "--batch-sizes", "2", "--iterations", "1",
                      "--output", str(tmp_path), env=env)
    run_dir = run_folder(result)
    assert f"ncu: Tesla V100-SXM2-16GB lacks {hmma}; profiling without" in result.stdout
    metrics = option(calls(tmp_path, "ncu")[-1], "--metrics").split(",")
    assert "sm__inst_executed_pipe_fp16" + SUFFIX in metrics
    assert "sm__inst_executed_pipe_tensor" + SUFFIX in metrics  # the original suite's metric, on pre-8.6 GPUs
    assert not any(m.startswith(("sm__inst_executed_pipe_fma_type_fp16", "sm__inst_executed_pipe_tensor_op_gmma"))
                   for m in metrics)
    assert hmma not in metrics
    assert {WEIGHT, "sm__inst_executed_pipe_fma" + SUFFIX, "sm__pipe_tensor_cycles_active" + SUFFIX,
            "sm__inst_executed_pipe_xu" + SUFFIX} <= set(metrics)
    assert json.loads((run_dir / "profile.json").read_text())["settings"] == metrics
    assert "sm__inst_executed_pipe_tensor_op_hmma" not in (run_dir / "ncu_query_metrics.txt").read_text()
    row = read_summary(run_dir)[0]
    assert row["status"] == "ok"
    assert row["fp16_metric"] == "sm__inst_executed_pipe_fp16" + SUFFIX
    assert float(row["fp16"]) == pytest.approx(2.5)  # (0, 5, 10) weighted by (1, 3, 1), times 2/4
    assert float(row["fma"]) == pytest.approx(11.0)  # weighted by the cycles: 22 x 2/4


# --metrics and --clock-control used as given: the second run of the Hopper test above.


@pytest.mark.slow
@pytest.mark.parametrize("channel", ["log-file", "stdout"])
def test_counter_permission_refusal_stops_the_sweep_with_both_fixes(tmp_path: Path, channel: str) -> None:
    # With --log-file ncu writes its ==ERROR== lines there, not to the worker's output.
    env = standin_env(tmp_path, STANDIN_NCU_MODE="nvgpuctrperm", STANDIN_NCU_ERROR_TO=channel)
    result = run_main("profile", "ncu", *TINY_NETWORK, "--batch-sizes", "2,3", "--iterations", "1",
                      "--output", str(tmp_path / "out"), env=env)
    assert_one_line_error(result, "ERR_NVGPUCTRPERM", "SYS_ADMIN", "NVreg_RestrictProfilingToAdminUsers")
    run_dir = tmp_path / "out" / "profiled_data_ncu"
    results = json.loads((run_dir / "profile.json").read_text())["results"]
    assert [(r["batch_size"], r["status"]) for r in results] == [(2, "error")]
    assert "NVreg_RestrictProfilingToAdminUsers" in results[0]["error"]
    assert not (run_dir / "logs" / "batch_3.log").exists()  # every batch size would meet it: none more is run
    assert len(calls(tmp_path, "ncu")) == 2  # the query and batch 2


# --- refusals before anything runs ---------------------------------------------------------------------------

@pytest.mark.parametrize(
    ("profiler", "tools", "env", "args", "fragments"),
    [
        ("ncu", ("ncu",), {}, [], ["ncu profiles NVIDIA GPUs", "no nvidia-smi"]),
        ("nsys", TOOLS, {"CUDA_VISIBLE_DEVICES": ""}, [], ["CUDA_VISIBLE_DEVICES=''", "hides every GPU"]),
        ("ncu", TOOLS, {"STANDIN_GPU": ""}, [], ["nvidia-smi found no GPU 0", "No devices were found"]),
        ("ncu", ("nvidia-smi",), {}, [], ["ncu: not found on PATH"]),
        ("ncu", TOOLS, {"STANDIN_GPU": "Tesla P100-PCIE-16GB, 6.0"}, [], ["compute capability 6.0", "nvprof"]),
        ("nvprof", TOOLS, {}, [], ["nvprof cannot profile compute capability 9.0", "nsys"]),
        ("ncu", TOOLS, {}, ["--device", "cpu"], ["drop --device cpu"]),
        ("ncu", TOOLS, {}, ["--gpus", "2"], ["ncu cannot profile 2 processes", "NCCL kernel waits"]),
        ("nvprof", TOOLS, {"STANDIN_GPU": "Tesla V100-SXM2-16GB, 7.0"}, ["--torchrun"], ["torchrun's agent"]),
    ],
    ids=["no-nvidia-smi", "gpus-hidden", "nvidia-smi-no-gpu", "no-ncu", "ncu-pascal", "nvprof-hopper", "device-cpu",
         "ncu-two-processes", "nvprof-torchrun"],
)
def test_refusal_is_one_line_and_leaves_no_folder(tmp_path: Path, profiler: str, tools: tuple[str, ...],
                                                  env: dict[str, str], args: list[str], fragments: list[str]) -> None:
    full_env = {**standin_env(tmp_path, tools=tools, keep_path=False), **env}
    result = run_main("profile", profiler, *TINY, "--batch-sizes", "2", *args, "--output", str(tmp_path / "out"),
                      env=full_env)
    assert_one_line_error(result, *fragments)
    assert not (tmp_path / "out").exists() or list((tmp_path / "out").iterdir()) == []
    for tool in ("ncu", "nsys", "nvprof"):
        assert [argv for argv in calls(tmp_path, tool) if "--query-metrics" not in argv] == []  # nothing profiled


def test_nvidia_smi_is_asked_about_the_first_visible_gpu(tmp_path: Path) -> None:
    uuid = "GPU-8a1b2c3d-0000-1111-2222-333344445555"
    env = standin_env(tmp_path, CUDA_VISIBLE_DEVICES=f"{uuid},0")
    result = run_main("profile", "nvprof", *TINY, "--batch-sizes", "2", "--output", str(tmp_path), env=env)
    assert_one_line_error(result, "nvprof cannot profile compute capability 9.0 (NVIDIA H100 80GB HBM3")
    assert calls(tmp_path, "nvidia-smi") == [["--query-gpu=name,compute_cap", "--format=csv,noheader", "-i", uuid]]


# --- nvprof ---------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_nvprof_on_volta_writes_a_profile_and_a_gpu_trace(tmp_path: Path) -> None:
    env = standin_env(tmp_path, gpu=V100)
    run_dir = run_folder(run_main("profile", "nvprof", *TINY_NETWORK, "--batch-sizes", "2", "--start-iteration", "2",
                                  "--iterations", "2", "--output", str(tmp_path), env=env))
    assert run_dir == tmp_path / "profiled_data_nvprof"
    (argv,) = calls(tmp_path, "nvprof")
    assert option(argv, "--profile-from-start") == "off"
    assert option(argv, "--export-profile") == str(run_dir / "batch_2.nvvp")
    assert option(argv, "--log-file") == str(run_dir / "batch_2.gputrace.csv")
    assert "--print-gpu-trace" in argv and "--csv" in argv
    assert (run_dir / "batch_2.nvvp").read_bytes().startswith(b"SQLite format 3\x00")
    assert "volta_sgemm_128x64_nn" in (run_dir / "batch_2.gputrace.csv").read_text()
    row = read_summary(run_dir)[0]
    assert (row["status"], row["nvvp"], row["gpu_trace"], row["error"]) == (
        "ok", "batch_2.nvvp", "batch_2.gputrace.csv", "")
    # The stand-in's trace: a copy from 584.620743 ms for 1.028854 ms, one kernel from 587.796940 ms for 0.077602 ms.
    assert row["kernels"] == "1"
    assert float(row["window_ms"]) == pytest.approx(587.874542 - 584.620743)
    assert float(row["gpu_busy_fraction"]) == pytest.approx(0.077602 / (587.874542 - 584.620743))
    assert_window(run_dir, 2, 2, 2)


# --- nsys -----------------------------------------------------------------------------------------------------

@pytest.mark.slow
def test_nsys_script_exports_and_merges_concurrent_streams(tmp_path: Path) -> None:
    env = standin_env(tmp_path, BATCH_SIZES="2")
    run_dir = run_folder(run_script(tmp_path, env, "nsys", "1", "3"))
    assert run_dir == tmp_path / "out" / "profiled_data_nsys"
    profile, export = calls(tmp_path, "nsys")
    assert profile[0] == "profile"
    assert "--capture-range=cudaProfilerApi" in profile
    assert "--trace=cuda,nvtx,cudnn,cublas" in profile
    assert option(profile, "--output") == str(run_dir / "batch_2")
    assert export == ["export", "--type", "sqlite", "--output", str(run_dir / "batch_2.sqlite"),
                      str(run_dir / "batch_2.nsys-rep")]
    # Each of the 3 steps (1000 ns): kernels [100, 400) and [700, 800) on one stream, [300, 650) on another:
    # busy 650 ns as a union, where adding durations would say 750; the warm-up kernel before step 1 is outside.
    row = read_summary(run_dir)[0]
    assert row["status"] == "ok" and row["error"] == "", row
    assert float(row["gpu_busy_fraction"]) == pytest.approx(0.65)
    assert float(row["window_ms"]) == pytest.approx(3000 / 1e6)
    assert int(row["steps"]) == 3
    assert float(row["step_gpu_ms_median"]) == pytest.approx(650 / 1e6)
    assert float(row["memcpy_ms"]) == pytest.approx(300 / 1e6)
    assert int(row["kernels"]) == 9
    assert row["top_kernel"] == "sm80_xmma_wgrad_implicit_gemm_tf32f32_nhwc"  # 3 x 350 ns, by its demangled name
    timeline = json.loads((run_dir / "batch_2.timeline.json").read_text())
    assert timeline["gpu_busy_fraction"] == pytest.approx(0.65)
    assert (timeline["gpu_busy_ns"], timeline["kernel_ns_sum"], timeline["window_ns"]) == (1950, 2250, 3000)
    assert_window(run_dir, 2, 1, 3)


@pytest.mark.slow
def test_timeout_ends_the_profiler_and_the_worker_it_runs(tmp_path: Path) -> None:
    """A worker runs under the profiler, not under the CLI: a timeout must end both, not leave the worker running."""
    from tests.test_throughput_e2e import _processes_running

    out = tmp_path / "out"
    result = run_cli("profile", "ncu", *TINY_NETWORK, "--batch-sizes", "2", "--start-iteration", "1000000",
                     "--iterations", "1", "--timeout", "3", "--output", str(out), env=standin_env(tmp_path))
    assert result.returncode == 1, result.stdout + result.stderr
    (row,) = json.loads((out / "profiled_data_ncu" / "profile.json").read_text())["results"]
    assert (row["status"], row["error"]) == ("error", "timed out after 3.0 s")
    assert _processes_running(str(out)) == []
