"""The TensorFlow engine: a workload's tf-models-official network with a compiled custom training step.

The network, its synthetic batch, its loss and the variables weight decay covers come from the workload's builder
(``engines/tf/workloads/<name>.py``, named by the descriptor's ``builders["tf"]``); this module keeps the step
machinery. Everything is built on tf_keras (Keras 2): layers, optimizer and mixed precision, never Keras 3.

Training step (shared by the benchmark runner and the trainer), per replica:

- loss = the builder's mean loss over the replica's examples (ResNet-50: categorical cross-entropy with label
  smoothing on the model's float32 softmax), divided by the number of replicas, so gradients all-reduced (summed)
  over replicas are those of the global mean;
- weight decay: the penalty ``weight_decay * sum(||w||^2) / 2`` is added here, over the variables
  ``engines.base.is_decayed`` names, as torch's engine decays (kernels, matrices and embeddings, not biases or norms:
  the official ResNet-50 is built without its own regulariser). Its gradient is ``weight_decay * w``, the same as
  ``torch.optim.SGD(weight_decay=...)``; AdamW decays the same variables itself;
- the workload's reference optimizer, as torch's engine runs it: tf_keras SGD with momentum, Adam (weight decay as
  the same L2 penalty, none in the references) or AdamW (decoupled, ``exclude_from_weight_decay``), Adam's epsilon
  1e-8 as torch's; ``mixed_float16`` adds a dynamic ``LossScaleOptimizer``;
- fp32 products as ``ModelConfig.matmul_precision`` says: TF32 allowed ("high", TensorFlow's own default) or not
  ("highest"), set explicitly as torch's engine sets it;
- ``tf.function``, with ``jit_compile=True`` when ``ModelConfig.xla`` (XLA is then also used for the optimizer's
  update; with ``xla=False`` nothing is XLA-compiled).

The logged training loss is the builder's loss alone, without the weight-decay penalty, as a PyTorch
``CrossEntropyLoss`` would report it; the evaluation loss is the same criterion on the evaluation set (the
builder's ``eval_outputs``, without dropout).

End-to-end training (``make_trainer``) runs ResNet-50 on learnable images and the sequence workloads on learnable
token sequences (``data.synthetic``), each made into the workload's batches by its builder (``batch_from_tokens``),
through the same step; accuracy there is token accuracy (the predicted tokens of ``eval_outputs``).

Training FLOPs per sample (``_Runner.train_flops_per_sample``) are counted once per network shape, outside every
window, from the traced forward graph (loss included): 2 x the multiply-adds of every MatMul, BatchMatMul, Einsum
and convolution, as ``torch.utils.flop_counter.FlopCounterMode`` counts them, times 3 for the training step
(the backward pass computes two products per forward one).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import math
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The official model code calls ``tf.initializers``, which TensorFlow routes to Keras 3 unless this is set: the
# classifier would then get a Keras 3 initializer inside a tf_keras model. TensorFlow reads it when ``tf.keras``
# or ``tf.initializers`` is first touched (and at import, for ``from tensorflow.keras import``), so set it first.
os.environ["TF_USE_LEGACY_KERAS"] = "1"

import numpy as np
import tensorflow as tf
import tf_keras

from trainbench.config import BenchConfig, ModelConfig, OptimizerConfig, TrainConfig, train_data_problem
from trainbench.data.source import DataSource, open_source, record_count, tfrecords_only
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
from trainbench.engines.input_batches import tf_training_dataset
from trainbench.engines.tf import image_pipeline as tf_pipeline
from trainbench.engines.tf.distribute import make_strategy, world_record
from trainbench.engines.tf.workloads import Batch, TfBuilder, builder_of
from trainbench.errors import UsageError
from trainbench.frameworks import TENSORFLOW
from trainbench.training.metrics import top_k_correct

_POLICIES = {"fp32": "float32", "fp16": "mixed_float16", "bf16": "mixed_bfloat16"}


# --- model, optimizer, step ---------------------------------------------------------------------------------


@contextlib.contextmanager
def _policy(precision: str) -> Iterator[None]:
    """The mixed-precision policy is process-global: set it for building one model only, then put it back."""
    previous = tf_keras.mixed_precision.global_policy()
    tf_keras.mixed_precision.set_global_policy(_POLICIES[precision])
    try:
        yield
    finally:
        tf_keras.mixed_precision.set_global_policy(previous)


@dataclass
class _Parts:
    """Everything a training step needs, built once per runner or trainer."""

    strategy: tf.distribute.Strategy
    builder: TfBuilder
    network: tf_keras.Model
    optimizer: tf_keras.optimizers.Optimizer
    replica_step: Callable[..., tf.Tensor]  # (inputs, targets) -> this replica's share of the mean loss
    global_batch: int
    optimizer_text: str  # what the optimizer is, as recorded: "adamw (tf_keras, XLA)"
    matmul_precision: str  # fp32 products as set, read back: "highest" or "high"


PENALISED = ("sgd", "adam")  # optimizers whose weight decay is an L2 penalty in the loss (AdamW decays itself)


def _optimizer(config: OptimizerConfig, learning_rate: float, xla: bool,
               undecayed: list[tf.Variable]) -> tf_keras.optimizers.Optimizer:
    """SGD with momentum or Adam (weight decay as an L2 penalty in the loss), or AdamW with decoupled weight decay,
    which leaves ``undecayed`` alone. ``xla``: the update is compiled with the step (tf_keras' fastest form)."""
    if config.name == "adamw":
        optimizer = tf_keras.optimizers.AdamW(learning_rate=learning_rate, weight_decay=config.weight_decay,
                                              beta_2=config.beta2, epsilon=ADAM_EPSILON, jit_compile=xla)
        optimizer.exclude_from_weight_decay(var_list=undecayed)
        return optimizer
    if config.name == "adam":
        return tf_keras.optimizers.Adam(learning_rate=learning_rate, beta_2=config.beta2, epsilon=ADAM_EPSILON,
                                        jit_compile=xla)
    return tf_keras.optimizers.SGD(learning_rate=learning_rate, momentum=config.momentum, jit_compile=xla)


def set_matmul_precision(precision: str) -> str:
    """TF32 for fp32 products allowed ("high") or not ("highest"), set explicitly, and read back as recorded."""
    tf.config.experimental.enable_tensor_float_32_execution(precision == "high")
    return "high" if tf.config.experimental.tensor_float_32_execution_enabled() else "highest"


def _build_parts(
    model: ModelConfig, optimizer_config: OptimizerConfig, strategy: tf.distribute.Strategy, per_replica_batch: int
) -> _Parts:
    replicas = strategy.num_replicas_in_sync
    global_batch = per_replica_batch * replicas
    matmul_precision = set_matmul_precision(model.matmul_precision)
    builder = builder_of(model)
    tf_keras.utils.set_random_seed(model.seed)  # same initial weights for the same seed (python, numpy, tf)
    with _policy(model.precision), strategy.scope():
        network = builder.build(model)
        variables = network.trainable_variables
        decays = [is_decayed(variable.name, tuple(variable.shape)) for variable in variables]
        decayed = [variable for variable, decay in zip(variables, decays, strict=True) if decay]
        undecayed = [variable for variable, decay in zip(variables, decays, strict=True) if not decay]
        optimizer = _optimizer(optimizer_config, optimizer_config.learning_rate(global_batch), model.xla, undecayed)
        if model.precision == "fp16":
            optimizer = tf_keras.mixed_precision.LossScaleOptimizer(optimizer)
        # Create the momentum slots now, not at the first step: a checkpoint then restores into them immediately.
        optimizer.build(network.trainable_variables)
    # SGD, Adam: the L2 penalty in the loss (torch's weight_decay= gradient); AdamW decays the weights itself.
    weight_decay = optimizer_config.weight_decay if optimizer_config.name in PENALISED else 0.0
    smoothing = optimizer_config.label_smoothing
    scale_loss = model.precision == "fp16"

    def replica_step(inputs: Any, targets: Any) -> tf.Tensor:
        with tf.GradientTape() as tape:
            # This replica's mean over its examples, a 1/replicas share of the global mean.
            loss = builder.loss(network, (inputs, targets), smoothing) / replicas
            # Each replica adds its share of the penalty: the all-reduce sums the shares to one whole penalty.
            total = loss + weight_decay * tf.add_n([tf.nn.l2_loss(v) for v in decayed]) / replicas
            if scale_loss:
                total = optimizer.get_scaled_loss(total)
        grads = tape.gradient(total, variables)
        if scale_loss:
            grads = optimizer.get_unscaled_gradients(grads)
        optimizer.apply_gradients(zip(grads, variables, strict=True))
        return loss

    if model.xla:
        # The whole per-replica step is one XLA program, as in Keras' fit(jit_compile=True); MirroredStrategy
        # supports that on GPUs (it then all-reduces with collectives inside the program, without merge_call).
        replica_step = tf.function(replica_step, jit_compile=True)
    text = f"{optimizer_config.name} (tf_keras{', XLA' if model.xla else ''})"
    return _Parts(strategy, builder, network, optimizer, replica_step, global_batch, text, matmul_precision)


# --- counts: parameters, FLOPs -------------------------------------------------------------------------------


def parameter_count(network: tf_keras.Model) -> int:
    """Trainable parameters, each variable once (a layer shared by two heads is counted once)."""
    return sum(math.prod(variable.shape) for variable in _unique(network.trainable_variables))


def _unique(variables: Any) -> list[tf.Variable]:
    """``variables`` each once, in order (a variable shared by two layers is listed by both)."""
    return list({id(variable): variable for variable in variables}.values())


class FlopCountError(Exception):
    """The graph holds an operation whose FLOPs cannot be counted (an unknown shape, a nested call)."""


def _static(shape: tf.TensorShape, op: tf.Operation) -> list[int]:
    if not shape.is_fully_defined():
        raise FlopCountError(f"{op.type} {op.name} has the unknown shape {shape}")
    return list(shape.as_list())


def _einsum_macs(op: tf.Operation) -> int:
    """Multiply-adds of an Einsum: the product of every index's extent (each is summed or kept once)."""
    equation = op.get_attr("equation").decode().replace(" ", "")
    if "..." in equation:
        raise FlopCountError(f"Einsum {op.name} has an ellipsis ({equation})")
    extents: dict[str, int] = {}
    for letters, tensor in zip(equation.split("->")[0].split(","), op.inputs, strict=True):
        extents.update(zip(letters, _static(tensor.shape, op), strict=True))
    return math.prod(extents.values())


def op_macs(op: tf.Operation) -> int:
    """Multiply-adds of one matrix product or convolution; 0 for any other operation."""
    kind = op.type
    if kind in ("MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        left = _static(op.inputs[0].shape, op)
        transposed = op.get_attr("transpose_a" if kind == "MatMul" else "adj_x")
        inner = left[-2] if transposed else left[-1]
        return math.prod(_static(op.outputs[0].shape, op)) * inner
    if kind == "Conv2D":
        height, width, channels, _ = _static(op.inputs[1].shape, op)
        return math.prod(_static(op.outputs[0].shape, op)) * height * width * channels
    if kind == "DepthwiseConv2dNative":
        height, width, _, _ = _static(op.inputs[1].shape, op)
        return math.prod(_static(op.outputs[0].shape, op)) * height * width
    if kind == "Einsum":
        return _einsum_macs(op)
    if kind in ("PartitionedCall", "StatefulPartitionedCall", "While", "StatelessWhile", "If", "StatelessIf"):
        raise FlopCountError(f"{kind} {op.name} hides operations from the count")
    return 0


_FLOPS: dict[tuple[str, str, tuple[tuple[str, int], ...], str], float] = {}  # per network shape: a sweep counts once
_COUNT_BATCH = 2  # examples per replica the forward pass is traced with (FLOPs are per example: any batch will do)
# Seeds the count's batch (only its shapes are used) apart from the runner's, which must not depend on whether this
# network shape was counted before (its random ops would advance the same seeded generators).
_COUNT_SEED_OFFSET = 1_000_003


def train_flops_per_sample(parts: _Parts, model: ModelConfig) -> float:
    """3 x the forward pass's (and loss's) FLOPs per example, counted on a traced graph that never runs."""
    key = (model.workload, model.size, tuple(sorted(model.params().items())), model.precision)
    if key not in _FLOPS:
        strategy, builder, network = parts.strategy, parts.builder, parts.network
        with tf.device("/cpu:0"):
            batch = builder.synthetic_batch(model, _COUNT_BATCH, "/cpu:0", model.seed + _COUNT_SEED_OFFSET)
        specs = tf.nest.map_structure(lambda tensor: tf.TensorSpec(tensor.shape, tensor.dtype), batch)

        @tf.function
        def forward(example: Any) -> Any:
            return strategy.run(lambda given: builder.loss(network, given, 0.0), args=(example,))

        with _policy(model.precision):
            graph = forward.get_concrete_function(specs).graph
        macs = sum(op_macs(op) for op in graph.get_operations())
        # strategy.run traces the loss once per local replica, each on the whole count batch.
        examples = _COUNT_BATCH * len(strategy.extended.worker_devices)
        _FLOPS[key] = 3 * 2 * macs / examples
    return _FLOPS[key]


# --- benchmark runner ---------------------------------------------------------------------------------------


def _data_step(parts: _Parts, model: ModelConfig, source: DataSource) -> Callable[[], tf.Tensor]:
    """A step that takes the input pipeline's next batch: the pipeline is then part of the measured step. Every
    workload's records (``input_batches.tf_training_dataset``): ImageNet's, or the text and detection kinds."""
    strategy, replica_step = parts.strategy, parts.replica_step
    files = source.train
    dataset = tf_training_dataset(source, model, parts.global_batch)
    iterator = iter(strategy.experimental_distribute_dataset(dataset))

    @tf.function
    def step(batches: Any) -> tf.Tensor:
        return _first_loss(strategy, strategy.run(replica_step, args=next(batches)))

    def named_step() -> tf.Tensor:
        with tf_pipeline.naming_corrupt_shard(files):
            return step(iterator)

    return named_step


def _first_loss(strategy: tf.distribute.Strategy, losses: Any) -> tf.Tensor:
    """The first local replica's loss (its 1/replicas share of the mean): returned by the step as a tensor, never
    fetched in a window; read afterwards (``take_losses``) to check that every timed step trained on a finite loss."""
    return strategy.experimental_local_results(losses)[0]


class _Runner:
    """One random batch on the device, trained on again and again by one compiled step; or, with a data folder,
    the input pipeline's next batch every step."""

    def __init__(self, parts: _Parts, model: ModelConfig, per_replica_batch: int, data: str | None = None) -> None:
        self.samples_per_step: int = parts.global_batch  # all replicas: what samples/s must count
        self.compile_s: float | None = None  # traced and compiled in the warm-up's first step, which no window holds
        tokens = model.spec.tokens_per_sample(model.params())
        self.tokens_per_step: int | None = None if tokens is None else parts.global_batch * tokens
        self.parameters: int = parameter_count(parts.network)
        self.parameters_held = self.parameters  # MirroredStrategy keeps a replica of every variable on each GPU
        self.train_flops_per_sample: float | None = None
        self.flops_note = "not counted"
        self.network = parts.network  # for inspection (tests)
        self.builder = parts.builder  # its network's builder (RetinaNet's keeps the network's task)
        self._strategy = parts.strategy
        self._optimizer = parts.optimizer
        self._losses: list[tf.Tensor] = []
        self._count_flops(parts, model)
        self.step_record: dict[str, str | int | None] = {
            "matmul_precision": parts.matmul_precision, "optimizer": parts.optimizer_text,
            # TensorFlow does not say which attention kernel its ops ran, nor when its host waits for a device value;
            # NHWC is its convolutions' layout.
            "attention_kernel": None, "image_layout": "NHWC" if model.spec.image_tensors else None,
            "host_syncs_per_step": None, "activation_checkpointing": "none", "shard": None}
        if data is not None:
            self._step = _data_step(parts, model, tfrecords_only(open_source(data)))
            return
        strategy, builder = parts.strategy, parts.builder

        def make_batch(context: tf.distribute.experimental.ValueContext) -> Any:
            # Created on the replica's own device, so no step ever copies input from the host. The replica's id
            # counts every worker's replicas; worker_devices are this worker's.
            local_devices = strategy.extended.worker_devices
            device = local_devices[context.replica_id_in_sync_group % len(local_devices)]
            return builder.synthetic_batch(model, per_replica_batch, device, model.seed)

        inputs, targets = strategy.experimental_distribute_values_from_function(make_batch)
        replica_step = parts.replica_step

        @tf.function
        def step() -> tf.Tensor:
            # Captured, not passed: no argument handling on the host per call; the loss is returned, never fetched.
            return _first_loss(strategy, strategy.run(replica_step, args=(inputs, targets)))

        self._step = step

    @property
    def hardware_flops_per_sample(self) -> float | None:
        return self.train_flops_per_sample  # nothing is recomputed

    def _count_flops(self, parts: _Parts, model: ModelConfig) -> None:
        try:
            self.train_flops_per_sample = train_flops_per_sample(parts, model)
        except FlopCountError as error:
            self.flops_note = f"not counted: {error}"
            return
        self.flops_note = ("TF graph count: 2 x multiply-adds of MatMul/BatchMatMul/Einsum/convolutions in the traced "
                           "forward pass and loss, x 3 for training")

    def step(self) -> None:
        self._losses.append(self._step())

    def take_losses(self) -> list[float]:
        losses, self._losses = self._losses, []
        return [float(loss) * self._strategy.num_replicas_in_sync for loss in losses]

    def loss_scale(self) -> float | None:
        if isinstance(self._optimizer, tf_keras.mixed_precision.LossScaleOptimizer):
            return float(self._optimizer.loss_scale)
        return None

    def reset_peak_memory(self) -> None:
        for gpu in _local_gpus():
            tf.config.experimental.reset_memory_stats(gpu)

    def peak_memory(self) -> tuple[int | None, str]:
        gpus = _local_gpus()
        if not gpus:
            return None, ""
        peak = max(tf.config.experimental.get_memory_info(gpu)["peak"] for gpu in gpus)
        return int(peak), "tf.config.experimental.get_memory_info peak"

    def memory(self) -> MemoryBreakdown:
        parameters = _variable_bytes(self.network.trainable_variables)
        slots = self._optimizer.variables
        return MemoryBreakdown(
            parameters, parameters, _variable_bytes(slots), _variable_bytes(v for v in slots if v.shape.rank),
            None, "gradients: one per trainable variable, of its size (TensorFlow frees them inside the step); "
                  "activations: TensorFlow does not tell what the gradient tape keeps")

    def sync(self) -> None:
        if not isinstance(self._strategy, tf.distribute.MultiWorkerMirroredStrategy):
            tf.test.experimental.sync_devices()
            return
        # The other workers' devices are listed too, and sync_devices() fails on them (ops cannot run there):
        # wait for this worker's own. Every step's all-reduce already keeps the workers in step.
        own = self._strategy.extended.worker_devices[0].rsplit("/device:", 1)[0] + "/"
        for device in tf.config.list_logical_devices():
            if device.name.startswith(own):
                with tf.device(device.name):
                    tf.raw_ops.SyncDevice()


def _local_gpus() -> list[str]:
    """This process's GPUs as get_memory_info names them ("GPU:0")."""
    return [device.name.split("device:")[-1] for device in tf.config.list_logical_devices("GPU")]


def _variable_bytes(variables: Any) -> int:
    """The bytes of ``variables``, each once."""
    return sum(v.shape.num_elements() * v.dtype.size for v in _unique(variables))


# --- end-to-end trainer -------------------------------------------------------------------------------------


def _padded(array: np.ndarray, batch: int) -> np.ndarray:
    """Zero examples appended up to a whole number of batches."""
    return np.concatenate([array, np.zeros((-len(array) % batch, *array.shape[1:]), array.dtype)])


def _learnable_examples(model: ModelConfig, builder: TfBuilder, span: Span, batch: int) -> Batch:
    """Examples ``span`` of the learnable synthetic set, zero-padded up to whole batches of ``batch`` (1: none), as
    the workload's (inputs, targets): images and labels, or the sequences made into its batch format."""
    if model.spec.learnable_set == "images":
        images, labels = learnable_examples(*span, model.param("image_size"), model.param("num_classes"), model.seed)
        return _padded(images, batch), _padded(labels, batch)
    vocab = model.spec.dims(model.size)["vocab"]
    tokens = learnable_sequences(*span, model.param("seq_len"), vocab, model.seed)
    padded = _padded(tokens, batch)
    # Each row's indices in the set (padding rows: past the span's end) seed what is drawn for it (BERT's masks).
    return builder.batch_from_tokens(model, padded, "/cpu:0", span.start + np.arange(len(padded)))


def _synthetic_datasets(
    config: TrainConfig, builder: TfBuilder, global_batch: int
) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    """The learnable synthetic set: endless shuffled training batches, endless passes over the evaluation set."""
    model = config.model
    train_span, eval_span = synthetic_split(config)
    train_set = _learnable_examples(model, builder, train_span, 1)
    # Padded to whole batches with masked-out examples: a partial batch would hand some replica an empty one
    # (which the CPU convolution rejects) and would cost a second trace or XLA compilation.
    valid = np.arange(eval_span.size + -eval_span.size % global_batch) < eval_span.size
    eval_set = (*_learnable_examples(model, builder, eval_span, global_batch), valid)
    train_data = (
        tf.data.Dataset.from_tensor_slices(train_set)
        .shuffle(train_span.size, seed=model.seed, reshuffle_each_iteration=True)
        .repeat()
        # Full batches only (static shapes, even split over replicas); a batch may straddle two passes.
        .batch(global_batch, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
    eval_data = (
        tf.data.Dataset.from_tensor_slices(eval_set)
        .batch(global_batch, drop_remainder=True)
        .repeat()
        .prefetch(tf.data.AUTOTUNE)
    )
    return train_data, eval_data


def _record_datasets(
    config: TrainConfig, source: DataSource, global_batch: int, eval_count: int
) -> tuple[tf.data.Dataset, tf.data.Dataset]:
    """Endless shuffled training batches from train-*, endless padded passes over validation-*."""
    model = config.model
    train_data = tf_pipeline.training_dataset(source.train, global_batch, model.param("image_size"), model.seed)
    eval_data = tf_pipeline.evaluation_dataset(source.evaluation, global_batch, model.param("image_size"), eval_count)
    return train_data, eval_data


class _Trainer:
    def __init__(self, config: TrainConfig) -> None:
        strategy = make_strategy(config.model)
        replicas = strategy.num_replicas_in_sync
        if config.batch_size % replicas:
            raise UsageError(f"batch size {config.batch_size} does not split evenly over {replicas} replicas")
        parts = _build_parts(config.model, config.optimizer, strategy, config.batch_size // replicas)
        self._parts = parts
        self.network = parts.network
        self.global_batch: int = parts.global_batch
        # One process drives every replica under MirroredStrategy; with several workers, the chief alone writes.
        self.is_primary: bool = strategy.extended.should_checkpoint
        self._datasets(config)
        with strategy.scope():
            self._loss_sum = tf.Variable(0.0, trainable=False, dtype=tf.float32)
            self._loss_steps = tf.Variable(0.0, trainable=False, dtype=tf.float32)
            self._epoch = tf.Variable(0, trainable=False, dtype=tf.int64)
        # "model": the name every checkpoint so far saved the network under.
        self._checkpoint = tf.train.Checkpoint(model=self.network, optimizer=parts.optimizer, epoch=self._epoch)
        self._managers: dict[Path, tf.train.CheckpointManager] = {}
        self._train_step = self._compile_train_step()
        self._eval_step = self._compile_eval_step(config)

    def _datasets(self, config: TrainConfig) -> None:
        """The training and evaluation input, distributed over the replicas, and the step counts they give: the
        data folder's TFRecords, else the learnable synthetic set."""
        source = tfrecords_only(open_source(config.data)) if config.data is not None else None
        self._files = (*source.train, *source.evaluation) if source else ()  # named when a record is corrupt
        train_count = record_count(source.train) if source else config.synthetic_train_examples
        eval_count = record_count(source.evaluation) if source else config.synthetic_eval_examples
        self.steps_per_epoch: int = steps_for(train_count, self.global_batch, config.steps_per_epoch)
        self.eval_steps: int = steps_for(eval_count, self.global_batch, config.eval_steps)
        if source:
            train_data, eval_data = _record_datasets(config, source, self.global_batch, eval_count)
        else:
            train_data, eval_data = _synthetic_datasets(config, self._parts.builder, self.global_batch)
        strategy = self._parts.strategy
        self._train_iterator = iter(strategy.experimental_distribute_dataset(train_data))
        self._eval_data = strategy.experimental_distribute_dataset(eval_data)

    def _compile_train_step(self) -> Callable[[Any], None]:
        strategy, replica_step = self._parts.strategy, self._parts.replica_step

        @tf.function
        def train_step(iterator: Any) -> None:
            inputs, targets = next(iterator)
            loss = strategy.run(replica_step, args=(inputs, targets))
            # Accumulated on the device: no host fetch per step, mean_loss() reads it once per log interval.
            self._loss_sum.assign_add(strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None))
            self._loss_steps.assign_add(1.0)

        return train_step

    def _compile_eval_step(self, config: TrainConfig) -> Callable[[Any], Any]:
        strategy, network, model, builder = self._parts.strategy, self.network, config.model, self._parts.builder
        smoothing = config.optimizer.label_smoothing

        def replica_eval(inputs: Any, targets: Any, valid: tf.Tensor) -> tuple[tf.Tensor, ...]:
            # The training criterion (label smoothing included), so the two losses compare.
            losses, scores, labels = builder.eval_outputs(network, (inputs, targets), smoothing)
            return scores, losses, labels, tf.cast(valid, tf.int32)  # collectives gather no booleans

        if model.xla:
            replica_eval = tf.function(replica_eval, jit_compile=True)

        @tf.function
        def eval_step(iterator: Any) -> Any:
            # Every replica's outputs, of every worker (an all-gather with several workers), in the same order.
            outputs = strategy.run(replica_eval, args=next(iterator))
            return tuple(strategy.gather(output, axis=0) for output in outputs)

        return eval_step

    def train_step(self, learning_rate: float) -> None:
        self._parts.optimizer.learning_rate.assign(learning_rate)
        with tf_pipeline.naming_corrupt_shard(self._files):
            self._train_step(self._train_iterator)

    def mean_loss(self) -> float:
        steps = float(self._loss_steps.numpy())
        total = float(self._loss_sum.numpy())
        self._loss_sum.assign(0.0)
        self._loss_steps.assign(0.0)
        return total / steps if steps else math.nan

    def evaluate(self) -> dict[str, float]:
        iterator = iter(self._eval_data)  # from the start: every evaluation sees the same examples
        outputs: list[list[np.ndarray]] = [[], [], [], []]
        with tf_pipeline.naming_corrupt_shard(self._files):
            for _ in range(self.eval_steps):
                for collected, values in zip(outputs, self._eval_step(iterator), strict=True):
                    collected.append(values.numpy())
        scores, losses, labels, valid = (np.concatenate(collected) for collected in outputs)
        valid = valid.astype(bool)
        # An example holds one prediction (an image's class) or several (its tokens), in a row of scores each.
        predicted = np.repeat(valid, len(labels) // len(valid))
        scores, labels = scores[predicted], labels[predicted]
        return {
            "loss": float(losses[valid].mean()),
            "top1": top_k_correct(scores, labels, 1) / len(labels),
            "top5": top_k_correct(scores, labels, 5) / len(labels),
            "examples": float(valid.sum()),
        }

    def _manager(self, directory: Path) -> tf.train.CheckpointManager:
        directory = Path(directory)
        if directory not in self._managers:
            self._managers[directory] = tf.train.CheckpointManager(
                self._checkpoint, str(directory), max_to_keep=CHECKPOINTS_KEPT
            )
        return self._managers[directory]

    def save(self, directory: Path, epoch: int) -> None:
        # Complete-or-absent: TensorFlow writes the data and index files under temporary names and renames them,
        # and only then rewrites the 'checkpoint' state file (itself atomically) that names the newest checkpoint.
        # A crash mid-save leaves that file pointing at the previous complete checkpoint.
        self._epoch.assign(epoch)
        if self.is_primary:
            self._manager(directory).save(checkpoint_number=epoch)
            return
        # Another worker of several: saving is collective (batch norm's moving statistics are all-reduced as they
        # are read), so it saves too, as TensorFlow's multi-worker guide does: into a folder of its own, deleted.
        with tempfile.TemporaryDirectory(prefix="trainbench-worker-checkpoint-") as scratch:
            tf.train.CheckpointManager(self._checkpoint, scratch, max_to_keep=1).save(checkpoint_number=epoch)

    def restore(self, directory: Path) -> int:
        # Every worker restores the chief's checkpoint: with several nodes, ``directory`` must be shared.
        latest = self._manager(directory).latest_checkpoint if self.is_primary else tf.train.latest_checkpoint(
            str(directory)
        )
        if latest is not None:
            self._checkpoint.restore(latest).assert_existing_objects_matched()
        epoch = int(self._epoch.numpy()) if latest is not None else 0
        if isinstance(self._parts.strategy, tf.distribute.MultiWorkerMirroredStrategy):
            self._check_same_epoch(epoch, directory)
        return epoch

    def _check_same_epoch(self, epoch: int, directory: Path) -> None:
        """Workers resuming from different epochs would wait on each other's collectives forever: refuse."""
        strategy = self._parts.strategy

        @tf.function
        def every_epoch() -> tf.Tensor:
            return strategy.gather(strategy.run(lambda: tf.constant([epoch], tf.int64)), axis=0)

        epochs = sorted(set(every_epoch().numpy().tolist()))
        if len(epochs) > 1:
            raise UsageError(f"the workers found checkpoints after different epochs ({epochs}) in {directory}: "
                             "with several nodes, the run folder must be on a file system they share")


# --- the engine ---------------------------------------------------------------------------------------------


class TensorFlowEngine:
    name = "tf"
    capabilities = TENSORFLOW

    def versions(self) -> dict[str, Any]:
        build = tf.sysconfig.get_build_info()
        gpus = tf.config.list_physical_devices("GPU")
        return {
            "tensorflow": tf.__version__,
            "tf_models_official": importlib.metadata.version("tf-models-official"),
            "tf_keras": tf_keras.__version__,
            "cuda": build.get("cuda_version"),
            "cudnn": build.get("cudnn_version"),
            "devices": [device.name for device in tf.config.list_physical_devices()],
            "gpu_names": [tf.config.experimental.get_device_details(gpu).get("device_name") for gpu in gpus],
            "xla_auto_jit": tf.config.optimizer.get_jit(),  # tf.function(jit_compile=...) is set per run instead
            "tf_xla_flags": os.environ.get("TF_XLA_FLAGS", ""),
            "distributed": world_record(),
        }

    def make_runner(self, config: BenchConfig) -> _Runner:
        parts = _build_parts(config.model, config.optimizer, make_strategy(config.model), config.batch_size)
        return _Runner(parts, config.model, config.batch_size, config.data)

    def make_trainer(self, config: TrainConfig) -> _Trainer:
        if problem := config.model.spec.train_problem():
            raise UsageError(problem)
        if config.data is not None and (problem := train_data_problem(config.model)):
            raise UsageError(problem)  # TrainConfig refuses it first; the text and detection records feed throughput
        return _Trainer(config)


ENGINE = TensorFlowEngine()
