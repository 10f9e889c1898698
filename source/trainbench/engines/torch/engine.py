"""The PyTorch engine: the workload's network (its builder in engines/torch/workloads/), its reference optimizer
(SGD with momentum, Adam or AdamW, fused on a GPU), autocast for fp16/bf16, fp32 products as ``matmul_precision``
says.

The throughput runner and the end-to-end trainer build the model, the optimizer and the training step with the
same functions below, so a benchmarked step is exactly the step that training runs.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import itertools
import math
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
from torch import nn

from trainbench.config import (
    BenchConfig,
    ModelConfig,
    OptimizerConfig,
    TrainConfig,
    loader_problem,
    step_mode_problem,
    train_data_problem,
)
from trainbench.data.source import DataSource, count_examples, open_source
from trainbench.data.synthetic import learnable_examples, learnable_sequences
from trainbench.engines.base import (
    ADAM_EPSILON,
    CHECKPOINTS_KEPT,
    MemoryBreakdown,
    Span,
    is_decayed,
    steps_for,
    synthetic_split,
)
from trainbench.engines.devices import check_precision, resolve_device
from trainbench.engines.launchers import process_place
from trainbench.engines.torch import memory, meta_counts, parallel
from trainbench.engines.torch.probe import probe_step
from trainbench.engines.torch.workloads import TorchBuilder, builder_of, flops
from trainbench.errors import UsageError
from trainbench.frameworks import TORCH
from trainbench.training.metrics import top_k_correct

Batch = tuple[Any, Any]  # (inputs, targets): tensors, or tuples and dicts of them, as the workload's builder makes
StepFn = Callable[[Batch], torch.Tensor]

_AUTOCAST_DTYPES: dict[str, torch.dtype | None] = {"fp32": None, "fp16": torch.float16, "bf16": torch.bfloat16}
_CHECKPOINT = re.compile(r"epoch-(\d+)\.pt")
# Steps run before the warm-up when the step is compiled or captured: torch.compile traces and compiles on the
# first, and with CUDA graphs records on the second (forward and backward graphs); the third replays.
PREPARE_STEPS = 3


# --- shared construction: model, optimizer, one training step ---------------------------------------------------


def _device(model_config: ModelConfig, loader: str = "cpu", data: str | None = None) -> str:
    """The device to run on ('cpu' or 'cuda'), refusing what this machine cannot run ('auto' resolved here)."""
    device = resolve_device(model_config.device, torch.cuda.device_count(), "PyTorch")
    check_precision(model_config.precision, device)
    for problem in (step_mode_problem(model_config, device), loader_problem(loader, "torch", data, device)):
        if problem:
            raise UsageError(problem)
    return device


def _prepare_device(device: str, matmul_precision: str) -> None:
    if torch.device(device).type == "cuda":
        torch.backends.cudnn.benchmark = True  # fixed input shapes: let cuDNN pick the fastest algorithms
    _set_matmul_precision(matmul_precision)


def _set_matmul_precision(precision: str) -> None:
    """fp32 products as asked, set explicitly (TensorFlow's engine sets the same): "high" lets cuBLAS's matrix
    products and cuDNN's convolutions (whose default is TF32 already) use TF32, "highest" keeps both fp32. Set through
    the API torch.compile reads back (``get_float32_matmul_precision``; the newer per-backend one may not be mixed
    with it). On the CPU "high" would let oneDNN use TF32 too: kept fp32, as TF32 is the GPU's arithmetic."""
    torch.set_float32_matmul_precision(precision)
    torch.backends.cudnn.allow_tf32 = precision == "high"
    torch.backends.mkldnn.matmul.fp32_precision = "ieee"  # type: ignore[attr-defined]  # set in torch's C++ module


def matmul_precision() -> str:
    """The fp32 product precision in force, read back: "high" only when matrix products and convolutions both may
    use TF32."""
    tf32 = torch.get_float32_matmul_precision() == "high" and torch.backends.cudnn.allow_tf32
    return "high" if tf32 else "highest"


def _autocast(device_type: str, dtype: torch.dtype | None) -> torch.autocast:
    return torch.autocast(device_type, dtype=dtype, enabled=dtype is not None)


def _decay_order(network: nn.Module) -> tuple[list[int], int]:
    """The parameters' indices (network order) as the optimizer holds them: the decayed ones (``is_decayed``) first,
    then the others, each in network order; and how many are decayed."""
    decays = [is_decayed(name, tuple(p.shape)) for name, p in network.named_parameters()]
    decayed = [i for i, decay in enumerate(decays) if decay]
    return decayed + [i for i, decay in enumerate(decays) if not decay], len(decayed)


def _parameter_groups(network: nn.Module, weight_decay: float) -> list[dict[str, Any]]:
    """The decayed parameters, then the others with no decay: two groups."""
    parameters = list(network.parameters())
    order, decayed = _decay_order(network)
    return [{"params": [parameters[i] for i in order[:decayed]], "weight_decay": weight_decay},
            {"params": [parameters[i] for i in order[decayed:]], "weight_decay": 0.0}]


def _optimizer(network: nn.Module, config: OptimizerConfig, learning_rate: float, device_type: str,
               captured: bool = False) -> tuple[torch.optim.Optimizer, str]:
    """SGD with momentum and L2 weight decay, Adam with L2 weight decay, or AdamW with decoupled weight decay, on the
    decayed parameters; and what it is, as recorded ("adamw (torch, fused)"). Fused on a GPU: one kernel for every
    parameter's update, the fastest correct form; the multi-tensor (foreach) form on the CPU. ``captured``: the step
    is a CUDA graph, so Adam keeps its step count on the device (capturable)."""
    groups = _parameter_groups(network, config.weight_decay)
    form: dict[str, Any] = {"fused": True} if device_type == "cuda" else {"foreach": True}
    text = f"{config.name} (torch, {'fused' if 'fused' in form else 'foreach'})"
    if config.name in ("adam", "adamw"):
        adam = torch.optim.AdamW if config.name == "adamw" else torch.optim.Adam
        capturable = {"capturable": True} if captured else {}
        return adam(groups, lr=learning_rate, betas=(0.9, config.beta2), eps=ADAM_EPSILON,
                    weight_decay=config.weight_decay, **form, **capturable), text
    return torch.optim.SGD(groups, lr=learning_rate, momentum=config.momentum, weight_decay=config.weight_decay,
                           **form), text


def _grouped_state(saved: dict[str, Any], network: nn.Module, weight_decay: float) -> dict[str, Any]:
    """An optimizer state as ``_optimizer`` groups it today. Checkpoints written before weight decay left out the
    biases and norms hold one group of every parameter in network order: their per-parameter state (momentum, Adam
    moments) is renumbered into the two groups, so such a run still resumes."""
    if len(saved["param_groups"]) != 1:
        return saved
    (old,) = saved["param_groups"]
    order, decayed = _decay_order(network)
    renumbered = {old_index: new_index for new_index, old_index in enumerate(order)}
    groups = [{**old, "params": list(range(decayed)), "weight_decay": weight_decay},
              {**old, "params": list(range(decayed, len(order))), "weight_decay": 0.0}]
    return {"state": {renumbered[int(k)]: v for k, v in saved["state"].items()}, "param_groups": groups}


@dataclass
class _Parts:
    network: nn.Module  # the module built (checkpointed, sharded in place): state dicts, evaluation, probes
    builder: TorchBuilder
    optimizer: torch.optim.Optimizer
    optimizer_text: str  # what the optimizer is, as recorded: "adamw (torch, fused)"
    scaler: torch.amp.GradScaler | None  # fp16 only
    step: StepFn  # batch -> detached loss; queues the work, never synchronises
    device_type: str
    autocast_dtype: torch.dtype | None


def _network(model_config: ModelConfig, device: str, sharded: bool = False) -> tuple[TorchBuilder, nn.Module]:
    """The workload's builder and its network from the seed, its blocks checkpointed as asked: made on ``device``
    (its weights initialised there: the host's single thread took 20 s for Llama 1B), or, ``sharded`` (FSDP), on the
    host, where ``fully_shard`` moves each block to the device as it shards it, so the whole network is never on one
    device and its weights are the ones a replica on the CPU starts from."""
    torch.manual_seed(model_config.seed)
    builder = builder_of(model_config)
    with torch.device("cpu" if sharded else device):
        network = builder.build(model_config)
    if not sharded:
        network = network.to(device)  # anything a builder made on the host explicitly; keeps a channels_last layout
    parallel.recompute_blocks(builder, network, model_config)
    return builder, network


def _build(
    model_config: ModelConfig, optimizer_config: OptimizerConfig, learning_rate: float, device: str,
    distributed: bool = False, built: tuple[TorchBuilder, nn.Module] | None = None,
) -> _Parts:
    """Network (``built``, else ``_network``'s), optimizer and training step; ``distributed``: under a process
    group, the network held as ``--shard`` says (``parallel.distributed``)."""
    builder, network = built if built is not None else _network(model_config, device)
    forward = parallel.distributed(network, builder, model_config, device) if distributed else network
    if model_config.compile:
        # Static shapes: every batch of a run has the same shape (training drops the short last batch).
        # A module compiled is an OptimizedModule, itself a module (torch types the result as any callable).
        forward = cast(nn.Module, torch.compile(forward, mode=model_config.compile_mode, dynamic=False))
    device_type = torch.device(device).type
    optimizer, optimizer_text = _optimizer(network, optimizer_config, learning_rate, device_type,
                                           captured=model_config.cuda_graph)
    dtype = _AUTOCAST_DTYPES[model_config.precision]
    scaler = torch.amp.GradScaler(device_type) if model_config.precision == "fp16" else None
    step = _make_step(forward, builder, optimizer, scaler, device_type, dtype, optimizer_config.label_smoothing,
                      cache_casts=not model_config.cuda_graph)
    return _Parts(network, builder, optimizer, optimizer_text, scaler, step, device_type, dtype)


def _make_step(
    forward: nn.Module, builder: TorchBuilder, optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler | None, device_type: str, dtype: torch.dtype | None, smoothing: float,
    cache_casts: bool = True,
) -> StepFn:
    """One training step as a closure: the benchmark times this and nothing else, so it stays bare.
    ``cache_casts=False`` for a step captured as a CUDA graph: autocast's cast cache would outlive the capture."""

    def step(batch: Batch) -> torch.Tensor:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast(device_type, dtype=dtype, enabled=dtype is not None, cache_enabled=cache_casts):
            loss = builder.loss(forward, batch, smoothing)
        if scaler is None:
            loss.backward()
            optimizer.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
        return loss.detach()

    return step


# --- throughput benchmark ---------------------------------------------------------------------------------------


def _loader(source: DataSource, batch_size: int, model: ModelConfig, device: str, train: bool, loader: str,
            rank: int = 0, world: int = 1) -> torch.utils.data.DataLoader:
    """The input pipeline over a data folder; pinned host memory when the batches go to a GPU. The pipelines are
    imported here: they import torchvision, seconds of start-up a synthetic run of a sequence workload never needs."""
    from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
    from trainbench.engines.torch import image_pipeline as torch_pipeline
    from trainbench.engines.torch import record_pipeline as torch_records

    pin = torch.device(device).type == "cuda"
    if _reads_records(model):
        params = model.params()
        return torch_records.make_loader(source, batch_size, seq_len=params.get("seq_len", 0),
                                         image_size=params.get("image_size", 0), train=train, seed=model.seed,
                                         pin_memory=pin, rank=rank, world=world)
    if loader == "gpu":
        return gpu_pipeline.make_loader(source, batch_size, train=train, seed=model.seed, pin_memory=pin, rank=rank,
                                        world=world)
    return torch_pipeline.make_loader(source, batch_size, model.param("image_size"), train=train, seed=model.seed,
                                      pin_memory=pin, rank=rank, world=world)


def _reads_records(model: ModelConfig) -> bool:
    """Whether the workload reads converted records (``record_pipeline``), not ImageNet's images."""
    return not model.spec.image_input


def _batches(data_loader: torch.utils.data.DataLoader, model: ModelConfig, builder: TorchBuilder, device: str,
             train: bool, loader: str, endless: bool) -> Iterator[Batch]:
    """The loader's batches on the device: decoded and augmented there (``loader`` "gpu") or in the workers; for
    the record workloads, the builder's batch of each collated dict of features."""
    from trainbench.engines.torch import gpu_image_pipeline as gpu_pipeline
    from trainbench.engines.torch import image_pipeline as torch_pipeline

    if _reads_records(model):
        return (builder.batch_from_features(features, model, device)
                for features in torch_pipeline.loader_batches(data_loader, endless))
    if loader == "gpu":
        return gpu_pipeline.batches(data_loader, model.param("image_size"), device, train=train,
                                    channels_last=model.channels_last, endless=endless)
    return torch_pipeline.batches(data_loader, device, model.channels_last, endless=endless)


def _tensors(batch: Any) -> list[torch.Tensor]:
    """The tensors of a batch (nested tuples, lists and dicts of them) in one fixed order."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    items = batch.values() if isinstance(batch, dict) else batch
    return [tensor for item in items for tensor in _tensors(item)]


def _cloned(batch: Any) -> Any:
    """A batch of the same structure holding copies (in the same memory layout) of its tensors."""
    if isinstance(batch, torch.Tensor):
        return batch.clone()
    if isinstance(batch, dict):
        return {key: _cloned(value) for key, value in batch.items()}
    return type(batch)(_cloned(item) for item in batch)


class _GraphedStep:
    """The whole eager step (forward, backward, optimizer update) captured once as a CUDA graph and replayed:
    one launch a step instead of hundreds. Every tensor of a batch (a tuple, list or dict of them, as the
    workload's builder makes it) is copied into the graph's own buffers before each replay.
    As PyTorch documents whole-network capture: a few steps on a side stream first (cuDNN's choices, the
    optimizer's state), gradients set to None so backward allocates them from the graph's pool."""

    def __init__(self, step: StepFn, optimizer: torch.optim.Optimizer, batch: Batch, reuse: bool = False) -> None:
        # ``reuse``: the batch is the synthetic one, the same every step: the graph reads it where it is, so a replay
        # copies nothing (the eager step copies nothing either). Else the pipeline's batches are copied in.
        self._static: Batch = batch if reuse else _cloned(batch)
        self._buffers = _tensors(self._static)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(PREPARE_STEPS):
                step(self._static)
        torch.cuda.current_stream().wait_stream(side)
        optimizer.zero_grad(set_to_none=True)
        self._graph = torch.cuda.CUDAGraph()
        # thread_local: the input threads (DataLoader's pin memory, --loader gpu's decoding) go on making CUDA calls
        # during the capture; in the default "global" mode any such call invalidates it.
        with torch.cuda.graph(self._graph, capture_error_mode="thread_local"):
            self._loss = step(self._static)

    def __call__(self, batch: Batch) -> torch.Tensor:
        if batch is not self._static:
            for buffer, tensor in zip(self._buffers, _tensors(batch), strict=True):
                buffer.copy_(tensor, non_blocking=True)
        self._graph.replay()
        return self._loss


class _Runner:
    """Synthetic: one random batch made on the device and reused every step, so no input pipeline is measured.
    With a data folder: the input pipeline's next batch every step, so the pipeline is part of the step."""

    def __init__(self, config: BenchConfig, device: str) -> None:
        model = config.model
        device, self._distributed = parallel.join_world(device)
        self.samples_per_step: int = config.batch_size  # this process's (one device's); the sweep counts the world
        rank, _, world = process_place()
        learning_rate = config.optimizer.learning_rate(config.batch_size * world)
        sharded = self._distributed and model.shard == "fsdp"
        builder, network = _network(model, device, sharded=sharded)
        self._cuda = torch.device(device).type == "cuda"
        # --loader gpu prepares the next batches on a stream of its own: syncing the step's stream alone keeps that
        # prefetch out of --sync-every-step's step times (each step waits for its own batch already).
        self._input_stream_apart = (self._cuda and config.data is not None and config.loader == "gpu"
                                    and not _reads_records(model))
        self._losses: list[torch.Tensor] = []  # each step's loss, on the device, read outside the windows
        self._batches: Iterator[Batch] | None = None  # --data: the pipeline (its workers, the GPU loader's thread)
        self._next_batch = self._input(config, builder, device, rank, world)
        self.compile_s: float | None = None  # compiling or capturing the step, before (and apart from) any window
        tokens = model.spec.tokens_per_sample(model.params())
        self.tokens_per_step: int | None = None if tokens is None else config.batch_size * tokens
        self.parameters: int = meta_counts.trainable_parameters(network)
        # Counted and probed once per batch size, outside every window, never through compile or a graph, on the
        # network as the step holds it (its blocks checkpointed, its shards), so nothing runs that the step would not
        # fit: the hardware's FLOPs (a checkpointed block's forward again), the memory, the attention kernel, the
        # host syncs. The model's FLOPs are that count where nothing is recomputed or sharded; else the meta device's
        # count of the plain network (the same count: tests/test_sharding.py), which the step might not fit.
        probed, smoothing = self._probe_batch(config, builder, device), config.optimizer.label_smoothing
        device_type, dtype = torch.device(device).type, _AUTOCAST_DTYPES[model.precision]

        def autocast() -> torch.autocast:
            return _autocast(device_type, dtype)

        self._parts = _build(model, config.optimizer, learning_rate, device, self._distributed, (builder, network))
        self.hardware_flops_per_sample, self.flops_note = flops.train_flops_per_sample(
            builder, network, probed, config.batch_size, smoothing, autocast)
        self.train_flops_per_sample = self.hardware_flops_per_sample
        if sharded or model.activation_checkpointing != "none":
            counts = meta_counts.count(model)
            self.train_flops_per_sample, self.flops_note = counts.train_flops_per_sample, counts.note
        self._probe = probe_step(builder, network, probed, smoothing, autocast)
        self._train_step = self._parts.step
        self.parameters_held: int = parallel.held_parameters(network)
        self.step_record: dict[str, str | int | None] = {
            "matmul_precision": matmul_precision(), "optimizer": self._parts.optimizer_text,
            "attention_kernel": self._probe.attention_kernel, "image_layout": _image_layout(model),
            "host_syncs_per_step": len(self._probe.host_syncs),
            "activation_checkpointing": model.activation_checkpointing,
            "shard": model.shard if self._distributed else None}
        if model.compile or model.cuda_graph:
            if model.cuda_graph and self._distributed:
                raise UsageError("--cuda-graph runs one process; with --gpus use --compile reduce-overhead")
            self.compile_s = self._prepare(model)

    def _input(self, config: BenchConfig, builder: TorchBuilder, device: str, rank: int,
               world: int) -> Callable[[], Batch]:
        model = config.model
        if config.data is not None:
            loader = _loader(open_source(config.data), config.batch_size, model, device, True, config.loader, rank,
                             world)
            self._batches = _batches(loader, model, builder, device, True, config.loader, endless=True)
            return self._batches.__next__
        batch = builder.synthetic_batch(model, config.batch_size, device, model.seed)
        self._synthetic = batch
        return lambda: batch

    def _probe_batch(self, config: BenchConfig, builder: TorchBuilder, device: str) -> Batch:
        """The batch a probe step (a count, a measurement) runs on: the synthetic one, or one of the run's shape with
        --data (the pipeline's batches are the steps')."""
        model = config.model
        return (self._synthetic if config.data is None
                else builder.synthetic_batch(model, config.batch_size, device, model.seed))

    def _prepare(self, model: ModelConfig) -> float:
        """Compile (torch.compile) or capture (CUDA graph) the step now, timed: no window ever contains it. From
        then on a recompilation (a new shape, a changed guard) is an error, not a silently slower window."""
        start = time.perf_counter()
        if model.cuda_graph:
            self._train_step = _GraphedStep(self._parts.step, self._parts.optimizer, self._next_batch(),
                                            reuse=self._batches is None)
        else:
            for _ in range(PREPARE_STEPS):
                self.step()
        self.sync()
        if model.compile:
            torch._dynamo.config.error_on_recompile = True
        return time.perf_counter() - start

    @property
    def network(self) -> nn.Module:
        return self._parts.network

    def step(self) -> None:
        self._losses.append(self._train_step(self._next_batch()))

    def take_losses(self) -> list[float]:
        losses, self._losses = self._losses, []
        if isinstance(self._train_step, _GraphedStep):
            losses = losses[-1:]  # a replay writes its loss into the same tensor: only the last one is still there
        return torch.stack(losses).float().cpu().tolist() if losses else []

    def loss_scale(self) -> float | None:
        scaler = self._parts.scaler
        return float(scaler.get_scale()) if scaler is not None else None

    def reset_peak_memory(self) -> None:
        if self._cuda:
            torch.cuda.reset_peak_memory_stats()

    def peak_memory(self) -> tuple[int | None, str]:
        if not self._cuda:
            return None, ""
        return torch.cuda.max_memory_allocated(), "torch.cuda.max_memory_allocated"

    def memory(self) -> MemoryBreakdown:
        parts = self._parts
        every, state = memory.optimizer_bytes(parts.optimizer)
        return MemoryBreakdown(memory.parameter_bytes(parts.network), memory.gradient_bytes(parts.network), every,
                               state, self._probe.activation_bytes,
                               "activations: saved-tensor hooks on one eager step of the plain network")

    def sync(self) -> None:
        """This device done, then (several processes) every rank here: a window starts and ends together on all
        ranks, so the slowest rank's time is every rank's."""
        if self._input_stream_apart:
            torch.cuda.current_stream().synchronize()
        elif self._cuda:
            torch.cuda.synchronize()
        if self._distributed:
            torch.distributed.barrier()

    def close(self) -> None:
        """Stop the data folder's pipeline now (the GPU loader's thread, the DataLoader's workers): not at
        interpreter exit, where a thread inside nvJPEG or CUDA can crash the process after its result is good."""
        batches, self._batches = self._batches, None
        if batches is not None and hasattr(batches, "close"):  # a generator, or the GPU loader's GpuBatches
            batches.close()


# --- end-to-end training ----------------------------------------------------------------------------------------


def _on_device(images: np.ndarray, labels: np.ndarray, device: str, channels_last: bool) -> tuple[torch.Tensor, ...]:
    """NHWC numpy to NCHW tensors on the device (an NHWC buffer seen as NCHW already is channels_last)."""
    tensor = torch.from_numpy(images).permute(0, 3, 1, 2)
    tensor = tensor.contiguous(memory_format=torch.channels_last if channels_last else torch.contiguous_format)
    return tensor.to(device), torch.from_numpy(labels).to(device)


class _Trainer:
    def __init__(self, config: TrainConfig) -> None:
        model = config.model
        self._rank, _, self._world = process_place()
        if config.batch_size % self._world:
            raise UsageError(f"batch size {config.batch_size} does not split evenly over {self._world} processes")
        device, distributed = parallel.join_world(_device(model, config.loader, config.data))
        _prepare_device(device, model.matmul_precision)
        self._device = device
        self._parts = _build(model, config.optimizer, config.optimizer.learning_rate(config.batch_size), device,
                             distributed)
        self._smoothing = config.optimizer.label_smoothing
        self._weight_decay = config.optimizer.weight_decay
        self.global_batch = config.batch_size
        self.is_primary = self._rank == 0
        self._local_batch = config.batch_size // self._world
        self._channels_last = model.channels_last
        # The position in the synthetic stream (pass, cursor), checkpointed; real data restarts its pipeline.
        self._seed = model.seed
        self._pass, self._cursor = 0, 0
        self._real_data = config.data is not None
        if config.data is not None:
            self._init_real_data(config, config.data)
        else:
            self._init_synthetic_data(config)
        self._loss_sum = torch.zeros((), device=device)
        self._loss_steps = 0
        self._parts.network.train()

    def _init_synthetic_data(self, config: TrainConfig) -> None:
        train_span, eval_span = synthetic_split(config)
        eval_n = eval_span.size
        self._train, self._eval = self._examples(config.model, train_span), self._examples(config.model, eval_span)
        self._train_size, self._eval_size = train_span.size, eval_n
        self.steps_per_epoch = steps_for(train_span.size, config.batch_size, config.steps_per_epoch)
        self.eval_steps = steps_for(eval_n, config.batch_size, config.eval_steps)
        # With the default eval_steps every evaluation example is seen once; a larger count cycles the set.
        self._eval_total = config.eval_steps * config.batch_size if config.eval_steps else eval_n
        # The order of training examples: pass p over the set is a permutation seeded by (seed, p), so the
        # position in the stream (pass, cursor) is all a checkpoint needs to resume the same batches.
        self._order = self._permutation(0)

    def _examples(self, model: ModelConfig, span: Span) -> tuple[Any, ...]:
        """The learnable synthetic examples of ``span``, as ``_batch`` gathers them: (images, labels) tensors."""
        arrays = learnable_examples(*span, model.param("image_size"), model.param("num_classes"), model.seed)
        return _on_device(*arrays, self._device, model.channels_last)

    def _init_real_data(self, config: TrainConfig, data: str) -> None:
        """Training on the data folder's training split, evaluation on its validation split (train-*/validation-*
        shards or train/ and val/ trees); epochs and evaluation passes as long as the splits unless given."""
        source = open_source(data)

        def loader(train: bool) -> torch.utils.data.DataLoader:
            return _loader(source, self._local_batch, config.model, self._device, train, config.loader, self._rank,
                           self._world)

        self._model_config, self._loader_kind = config.model, config.loader
        self._train_batches = _batches(loader(True), config.model, self._parts.builder, self._device, True,
                                       config.loader, endless=True)
        self._eval_loader = loader(False)
        self._cycle_eval = config.eval_steps is not None  # a given step count may need more than one pass
        self.steps_per_epoch = steps_for(count_examples(source, True), config.batch_size, config.steps_per_epoch)
        self.eval_steps = steps_for(count_examples(source, False), config.batch_size, config.eval_steps)

    @property
    def network(self) -> nn.Module:
        return self._parts.network

    def _permutation(self, pass_number: int) -> torch.Tensor:
        order = np.random.default_rng((self._seed, pass_number)).permutation(self._train_size)
        return torch.from_numpy(order).to(self._index_device)

    @property
    def _index_device(self) -> str:
        """Where batches of examples are gathered: the device, which holds the whole synthetic set."""
        return self._device

    def _next_indices(self) -> torch.Tensor:
        """The next global batch of training indices, always full: a batch can span two passes over the set."""
        chunks, needed = [], self.global_batch
        while needed:
            if self._cursor == len(self._order):
                self._pass, self._cursor = self._pass + 1, 0
                self._order = self._permutation(self._pass)
            chunk = self._order[self._cursor:self._cursor + needed]
            self._cursor += len(chunk)
            needed -= len(chunk)
            chunks.append(chunk)
        indices = chunks[0] if len(chunks) == 1 else torch.cat(chunks)
        return indices[self._rank * self._local_batch:(self._rank + 1) * self._local_batch]

    def _batch(self, data: tuple[Any, ...], indices: torch.Tensor) -> Batch:
        return data[0][indices], data[1][indices]  # gathering rows keeps a channels_last layout

    def train_step(self, learning_rate: float) -> None:
        for group in self._parts.optimizer.param_groups:
            group["lr"] = learning_rate
        batch = next(self._train_batches) if self._real_data else self._batch(self._train, self._next_indices())
        self._loss_sum += self._parts.step(batch)
        self._loss_steps += 1

    def mean_loss(self) -> float:
        """This process's mean: with several GPUs each rank reports its own share of the batch."""
        if not self._loss_steps:
            return math.nan
        mean = float(self._loss_sum) / self._loss_steps  # float() synchronises
        self._loss_sum.zero_()
        self._loss_steps = 0
        return mean

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        """Loss (the training criterion, so it compares with the training loss), top-1 and top-5 accuracy."""
        parts = self._parts
        parts.network.eval()  # uncompiled: a compiled one would recompile for eval mode and the last partial batch
        totals = np.zeros(4)  # loss sum, top-1 hits, top-5 hits, examples
        for batch in self._eval_batches():
            with _autocast(parts.device_type, parts.autocast_dtype):
                losses, logits, labels = parts.builder.eval_outputs(parts.network, batch, self._smoothing)
            logits_np, labels_np = logits.float().cpu().numpy(), labels.cpu().numpy()
            totals += (float(losses.sum()), top_k_correct(logits_np, labels_np, 1),
                       top_k_correct(logits_np, labels_np, 5),
                       len(labels_np))
        totals = self._summed(totals)
        parts.network.train()
        loss_sum, top1, top5, examples = totals
        return {"loss": loss_sum / examples, "top1": top1 / examples, "top5": top5 / examples,
                "examples": float(examples)}

    def _summed(self, totals: np.ndarray) -> np.ndarray:
        """Evaluation totals summed over the processes (as they are alone)."""
        if self._world <= 1:
            return totals
        summed = torch.tensor(totals, device=self._device)
        torch.distributed.all_reduce(summed)
        return summed.cpu().numpy()

    def _eval_batches(self) -> Iterator[Batch]:
        """This rank's share of the evaluation batches."""
        if self._real_data:
            batches = _batches(self._eval_loader, self._model_config, self._parts.builder, self._device, False,
                               self._loader_kind, self._cycle_eval)
            try:
                yield from itertools.islice(batches, self.eval_steps) if self._cycle_eval else batches
            finally:
                if hasattr(batches, "close"):  # the GPU loader's thread would otherwise go on preparing a pass
                    batches.close()
            return
        for indices in self._eval_indices():
            yield self._batch(self._eval, indices)

    def _eval_indices(self) -> Iterator[torch.Tensor]:
        """This rank's share of each synthetic evaluation batch: indices into the evaluation set."""
        for start in range(0, self._eval_total, self.global_batch):
            stop = min(start + self.global_batch, self._eval_total)
            share = math.ceil((stop - start) / self._world)
            positions = torch.arange(start + self._rank * share, min(start + (self._rank + 1) * share, stop))
            if len(positions):  # else a rank past the end of a short last batch
                yield (positions % self._eval_size).to(self._index_device)

    def save(self, directory: Path, epoch: int) -> None:
        if self._rank == 0:
            parts = self._parts
            state = {
                "epoch": epoch,
                "model": parts.network.state_dict(),  # the key every checkpoint so far has
                "optimizer": parts.optimizer.state_dict(),
                "scaler": parts.scaler.state_dict() if parts.scaler else None,
                "data_position": (self._pass, self._cursor),
            }
            final = Path(directory) / f"epoch-{epoch:04d}.pt"
            temporary = final.with_name(f".{final.name}.tmp")  # never matches the checkpoint pattern
            with open(temporary, "wb") as out:
                torch.save(state, out)
                out.flush()
                os.fsync(out.fileno())
            os.replace(temporary, final)
            for _, stale in _checkpoints(directory)[:-CHECKPOINTS_KEPT]:  # only once the new one is in place
                stale.unlink()
        if self._world > 1:
            torch.distributed.barrier()  # no rank may restore or move on before the file exists

    def restore(self, directory: Path) -> int:
        found = _checkpoints(directory)
        if not found:
            return 0
        _, path = found[-1]
        state = torch.load(path, map_location=self._device, weights_only=True)
        parts = self._parts
        parts.network.load_state_dict(state["model"])
        parts.optimizer.load_state_dict(_grouped_state(state["optimizer"], parts.network, self._weight_decay))
        if parts.scaler is not None and state["scaler"] is not None:
            parts.scaler.load_state_dict(state["scaler"])
        if not self._real_data:
            self._pass, self._cursor = state["data_position"]
            self._order = self._permutation(self._pass)
        return int(state["epoch"])


class _SequenceTrainer(_Trainer):
    """The sequence workloads on the learnable token set (``learnable_sequences``): the builder makes each batch
    from the gathered sequences; evaluation reports the accuracy of the predicted tokens (top-1/top-5 over the
    tokens, "examples" counts sequences)."""

    def __init__(self, config: TrainConfig) -> None:
        self._model = config.model
        super().__init__(config)

    @property
    def _index_device(self) -> str:
        return "cpu"  # the token set stays on the host, where the builder makes its batches

    def _examples(self, model: ModelConfig, span: Span) -> tuple[Any, ...]:
        vocab = model.spec.dims(model.size)["vocab"]
        return learnable_sequences(*span, model.param("seq_len"), vocab, model.seed), span.start

    def _batch(self, data: tuple[Any, ...], indices: torch.Tensor) -> Batch:
        tokens, start = data
        rows = indices.numpy()
        return self._parts.builder.batch_from_tokens(self._model, tokens[rows], self._device, start + rows)

    @torch.no_grad()
    def evaluate(self) -> dict[str, float]:
        parts = self._parts
        parts.network.eval()
        totals = np.zeros(5)  # the sequences' losses, top-1 hits, top-5 hits, predicted tokens, sequences
        for indices in self._eval_indices():
            with _autocast(parts.device_type, parts.autocast_dtype):
                losses, logits, labels = parts.builder.eval_outputs(parts.network, self._batch(self._eval, indices),
                                                                    self._smoothing)
            logits = logits.float()
            totals += (float(losses.sum()), _top_k_hits(logits, labels, 1), _top_k_hits(logits, labels, 5),
                       len(labels), len(indices))
        loss_sum, top1, top5, tokens, sequences = self._summed(totals)
        parts.network.train()
        return {"loss": float(loss_sum / sequences), "top1": float(top1 / tokens), "top5": float(top5 / tokens),
                "examples": float(sequences)}


def _top_k_hits(logits: torch.Tensor, labels: torch.Tensor, k: int) -> int:
    """How many rows of ``logits`` have their label among the k largest scores (metrics.top_k_correct on the
    device: a vocabulary's logits for every token would be large to copy to the host)."""
    top = logits.topk(min(k, logits.shape[1]), dim=1).indices
    return int((top == labels.unsqueeze(1)).any(dim=1).sum())


def _image_layout(model: ModelConfig) -> str | None:
    """The layout an image network's convolutions run in: NCHW, PyTorch's default, unless --channels-last."""
    if not model.spec.image_tensors:
        return None
    return "NHWC" if model.channels_last else "NCHW"


def _checkpoints(directory: Path) -> list[tuple[int, Path]]:
    """The complete checkpoints in ``directory`` as (epoch, path), oldest first."""
    return sorted((int(match[1]), path) for path in Path(directory).glob("epoch-*.pt")
                  if (match := _CHECKPOINT.fullmatch(path.name)))


# --- the engine -------------------------------------------------------------------------------------------------


def _torchvision_version() -> str:
    """torchvision's own ``__version__`` (its build's local tag, e.g. +cu130, which the wheel's metadata leaves out),
    read from its version.py when it is not imported: importing it costs a sequence workload's worker a second."""
    if "torchvision" in sys.modules:
        return str(sys.modules["torchvision"].__version__)
    spec = importlib.util.find_spec("torchvision")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        found = re.search(r"^__version__ = ['\"]([^'\"]+)['\"]", (Path(folder) / "version.py").read_text(), re.M)
        if found:
            return found.group(1)
    return importlib.metadata.version("torchvision")


class TorchEngine:
    name = "torch"
    capabilities = TORCH

    def versions(self) -> dict[str, Any]:
        gpus = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
        return {
            "framework": "torch",
            "torch": torch.__version__,
            "torchvision": _torchvision_version(),
            "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() or None,
            "devices": ["cpu", *gpus],
            "threads": torch.get_num_threads(),
            "nccl": ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() else None,
            "distributed": parallel.world_record(),
        }

    def make_runner(self, config: BenchConfig) -> _Runner:
        device = _device(config.model, config.loader, config.data)
        _prepare_device(device, config.model.matmul_precision)
        return _Runner(config, device)

    def make_trainer(self, config: TrainConfig) -> _Trainer:
        if problem := config.model.spec.train_problem():
            raise UsageError(problem)
        if config.data is not None and (problem := train_data_problem(config.model)):
            raise UsageError(problem)  # TrainConfig refuses it first
        if config.model.spec.learnable_set == "images":
            return _Trainer(config)
        return _SequenceTrainer(config)


ENGINE = TorchEngine()
