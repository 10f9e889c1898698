"""The GPU-only code paths that a first GPU run would meet (docs/GPU_REVIEW.md's findings), checked on the CPU:
CUDA, NCCL and NVML are replaced by stand-ins that record what they were asked, so each test says what the code
asks of them (capture mode, device, profiler options), not what a GPU would then do. Refusals are one line.

Nothing here imports TensorFlow (the TensorFlow multi-worker path is checked with a stand-in strategy module).
"""

from __future__ import annotations

import contextlib
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from tests.standins.engine import StandInEngine
from tests.standins.nvml import pynvml as standin_nvml
from trainbench.bench import worker
from trainbench.config import BenchConfig, LaunchConfig, ModelConfig, problems
from trainbench.data.source import IMAGE_FOLDER, DataSource
from trainbench.engines import input_batches
from trainbench.engines.torch import engine as torch_engine
from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
from trainbench.engines.torch import image_pipeline as torch_pipeline
from trainbench.engines.torch import parallel
from trainbench.errors import UsageError
from trainbench.profile.gpu_target import query_gpu
from trainbench.profile.nsys import Nsys
from trainbench.telemetry.nvml import visible_gpu_count
from trainbench.telemetry.probe import GpuProbe

V100 = {"name": "Tesla V100-SXM2-16GB", "uuid": "GPU-5b1c1d7e-0f43-7c55-1a39-8d1b2f2b3e10",
        "compute_capability": [7, 0], "power_w": 100.0, "energy_start_mj": 0}


@pytest.fixture
def nvml(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    """nvml(spec): the stand-in pynvml answering from ``spec`` (None: no NVML, as on a machine without driver)."""
    monkeypatch.delenv("STANDIN_NVML", raising=False)

    def install(spec: dict[str, Any] | None) -> Any:
        module = standin_nvml.fresh(spec)
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    yield install


# --- A1: the whole-step CUDA graph is captured in thread_local mode -------------------------------------------


class _Recorder:
    """A stand-in for what _GraphedStep asks of torch.cuda: streams that do nothing, a graph that records how it
    was captured."""

    def __init__(self) -> None:
        self.captures: list[dict[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        stream = types.SimpleNamespace(wait_stream=lambda other: None)
        monkeypatch.setattr(torch.cuda, "Stream", lambda *args, **kwargs: stream)
        monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: stream)
        monkeypatch.setattr(torch.cuda, "stream", lambda given: contextlib.nullcontext())
        monkeypatch.setattr(torch.cuda, "CUDAGraph", lambda: types.SimpleNamespace(replay=lambda: None))

        @contextlib.contextmanager
        def graph(cuda_graph: Any, **options: Any) -> Iterator[None]:
            self.captures.append(options)
            yield

        monkeypatch.setattr(torch.cuda, "graph", graph)


def test_the_whole_step_is_captured_in_thread_local_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    recorder.install(monkeypatch)
    network = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)

    def step(batch: Any) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        loss = network(batch[0]).sum()
        loss.backward()
        optimizer.step()
        return loss.detach()

    torch_engine._GraphedStep(step, optimizer, (torch.ones(4, 3), torch.zeros(4)))
    # The input threads (pin memory, --loader gpu) go on calling CUDA during the capture: "global" would fail it.
    assert recorder.captures == [{"capture_error_mode": "thread_local"}]


def test_a_graph_of_the_synthetic_batch_replays_without_copying_it(monkeypatch: pytest.MonkeyPatch) -> None:
    _Recorder().install(monkeypatch)
    network = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(network.parameters(), lr=0.1)
    synthetic = (torch.ones(4, 3), torch.zeros(4))
    step = lambda batch: network(batch[0]).sum().detach()  # noqa: E731 - a step that only reads the batch
    copied: list[int] = []
    monkeypatch.setattr(torch.Tensor, "copy_", lambda self, *args, **kwargs: copied.append(1))
    reused = torch_engine._GraphedStep(step, optimizer, synthetic, reuse=True)
    reused(synthetic)
    assert copied == []  # as the eager step, which copies nothing
    from_pipeline = torch_engine._GraphedStep(step, optimizer, synthetic)
    from_pipeline((torch.ones(4, 3), torch.zeros(4)))
    assert len(copied) == 2  # each tensor of the pipeline's batch into the graph's own


# --- A2: nsys sees the kernels inside CUDA graphs ---------------------------------------------------------------


def test_nsys_traces_every_kernel_node_of_a_cuda_graph(tmp_path: Path) -> None:
    command = Nsys().command(tmp_path, 8)
    assert "--cuda-graph-trace=node" in command
    assert command.index("--cuda-graph-trace=node") < command.index("--output")


# --- A3 and C: the input bench of a torchrun rank runs on that rank's GPU, and gives its cache back ------------


def test_the_gpu_input_bench_decodes_on_its_local_ranks_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, Any]] = []
    monkeypatch.setenv("LOCAL_RANK", "3")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: calls.append(("set_device", device)))
    monkeypatch.setattr(torch.cuda, "current_stream", lambda *args: types.SimpleNamespace(synchronize=lambda: None))
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: calls.append(("empty_cache", None)))
    monkeypatch.setattr(gpu_pipeline, "make_loader", lambda *args, **kwargs: "loader")

    class Batches:
        def __init__(self, loader: Any, image_size: int, device: str, **options: Any) -> None:
            calls.append(("batches", device))

        def __iter__(self) -> Iterator[str]:
            return iter(["batch"] * 5)

        def close(self) -> None:
            calls.append(("close", None))

    monkeypatch.setattr(gpu_pipeline, "batches", Batches)
    source = DataSource(Path("/images"), IMAGE_FOLDER, (Path("/images"),), ())
    batches = input_batches.torch_batches(source, 2, 32, 0, 0, "gpu")
    assert next(batches) == "batch"
    batches.close()
    assert calls == [("set_device", "cuda:3"), ("batches", "cuda:3"), ("close", None), ("empty_cache", None)]


# --- A4: MIG instances are GPUs CUDA shows, and their parent's counters are not this run's ---------------------


MIG = "MIG-4f1c2a3b-1111-2222-3333-444455556666"


def test_mig_instances_in_cuda_visible_devices_count_as_gpus(nvml: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml({"gpus": [V100]})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    assert visible_gpu_count() == 1  # was 0: --device auto measured the CPU, --device cuda was refused
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", f"{MIG},MIG-0000aaaa-1111-2222-3333-444455556666")
    assert visible_gpu_count() == 2


def test_under_mig_no_energy_is_read_from_the_parent_gpu(nvml: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml({"gpus": [V100]})
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", MIG)
    assert GpuProbe.open("cuda") == "no GPU telemetry: no per-GPU energy under MIG (CUDA_VISIBLE_DEVICES names MIG " \
                                    "instances)"
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")  # the whole GPU: its counters are the run's
    probe = GpuProbe.open("cuda")
    assert isinstance(probe, GpuProbe)
    probe.close()


# --- A5: a TensorFlow worker of several makes its strategy before the input bench runs tf.data -----------------


def test_a_tf_worker_of_several_makes_its_strategy_before_the_input_bench(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    order: list[str] = []
    cluster: list[object] = []
    standin = types.ModuleType("trainbench.engines.tf.distribute")
    standin.cluster_of = lambda environ: cluster[0] if cluster else None  # type: ignore[attr-defined]
    standin.make_strategy = lambda model: order.append(f"strategy for {model.framework}")  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "trainbench.engines.tf.distribute", standin)
    monkeypatch.setattr(worker, "measure_input", lambda bench: order.append("input bench") or {"samples_per_sec": 1.0})
    config = BenchConfig(model=ModelConfig(framework="tf", image_size=32, num_classes=10), batch_size=2,
                         data=str(tmp_path))
    worker.input_rate(config)
    assert order == ["input bench"]  # alone: the strategy can come later, with the model
    order.clear()
    cluster.append(object())  # TF_CONFIG or a Slurm step of two workers
    worker.input_rate(config)
    assert order == ["strategy for tf", "input bench"]


# --- A6, A7, C: launches that a step mode or a profiler cannot run under are refused before anything starts -----


@pytest.mark.parametrize(("model", "launch", "profiler", "fragments"), [
    (ModelConfig(), LaunchConfig(processes_per_node=2), "ncu", ["ncu cannot profile 2 processes", "NCCL"]),
    (ModelConfig(), LaunchConfig(processes_per_node=2), "nvprof", ["torchrun's agent"]),
    (ModelConfig(), LaunchConfig(torchrun=True), "nvprof", ["torchrun's agent"]),
    (ModelConfig(cuda_graph=True, precision="bf16"), LaunchConfig(torchrun=True), None,
     ["--cuda-graph", "--compile reduce-overhead"]),
])
def test_launches_a_step_mode_or_profiler_cannot_run_under_are_refused(
        model: ModelConfig, launch: LaunchConfig, profiler: str | None, fragments: list[str]) -> None:
    (first, *_) = problems(model, launch=launch, profiler=profiler)
    for fragment in fragments:
        assert fragment in first
    assert problems(model, launch=LaunchConfig(), profiler=profiler) == []  # one process: fine


def test_cuda_graph_with_ddp_is_refused_when_configured() -> None:
    with pytest.raises(UsageError, match="--cuda-graph captures one process's eager step"):
        BenchConfig(model=ModelConfig(cuda_graph=True, precision="bf16"), batch_size=2,
                    launch=LaunchConfig(processes_per_node=2))


def test_the_profilers_gpu_comes_from_nvml_without_nvidia_smi(nvml: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml({"gpus": [V100]})
    monkeypatch.setenv("PATH", "")  # no nvidia-smi: R470 drivers' one has no compute_cap field anyway
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    target = query_gpu("nvprof")
    assert (target.name, target.compute_capability) == ("Tesla V100-SXM2-16GB", (7, 0))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", V100["uuid"])
    assert query_gpu("nvprof").compute_capability == (7, 0)


def test_without_nvml_the_profilers_gpu_falls_back_to_nvidia_smi(nvml: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    nvml(None)
    monkeypatch.setenv("PATH", "")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0")
    with pytest.raises(UsageError, match="there is no nvidia-smi here"):
        query_gpu("ncu")


# --- B2: each rank's DataLoader gets its share of the cores, and a bounded prefetch ---------------------------


def test_each_rank_of_a_node_gets_its_share_of_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch_pipeline.os, "sched_getaffinity", lambda pid: set(range(16)))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert torch_pipeline.default_workers() == 16
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "4")
    assert torch_pipeline.default_workers() == 4
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "32")
    assert torch_pipeline.default_workers() == 1


@pytest.mark.filterwarnings("ignore:This DataLoader will create")  # 12 workers on 2 cores: never started here
def test_prefetch_is_bounded_over_all_workers() -> None:
    assert [torch_pipeline.prefetch_factor(workers) for workers in (0, 1, 8, 9, 128)] == [None, 2, 2, 1, 1]
    loader = torch_pipeline.loader_over(list(range(8)), 2, train=True, shuffle_sampler=False, seed=0, workers=12,
                                        pin_memory=False)
    assert loader.prefetch_factor == 1  # never started: no worker runs here


# --- B6 and C: the runner's pipeline is stopped after the windows; the process group knows its GPU and is left --


def test_the_worker_closes_the_runner_even_when_a_window_fails(tmp_path: Path) -> None:
    closed: list[bool] = []

    def failing() -> None:
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    engine = StandInEngine("failing", failing, close=lambda: closed.append(True))
    config = BenchConfig(model=ModelConfig(device="cpu", image_size=32, num_classes=10), batch_size=2,
                         warmup_steps=1, steps=2)
    with pytest.raises(RuntimeError):
        worker.measure(config, engine)  # type: ignore[arg-type]
    assert closed == [True]


def test_a_ranks_process_group_is_told_its_gpu_and_left_at_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, Any] = {}
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: seen.setdefault("set_device", device))
    monkeypatch.setattr(torch.distributed, "is_initialized", lambda: False)
    monkeypatch.setattr(torch.distributed, "init_process_group", lambda **options: seen.update(options))
    monkeypatch.setattr(parallel.atexit, "register", lambda function: seen.setdefault("at_exit", function))
    device, joined = parallel.join_world("cuda")
    assert device == "cuda:1" and joined
    assert seen["set_device"] == "cuda:1"
    assert (seen["backend"], seen["device_id"]) == ("nccl", torch.device("cuda:1"))
    assert seen["at_exit"] is parallel.leave_world
