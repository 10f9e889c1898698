"""What every engine promises, tested once and run for each framework (``load_engine``), plus the framework-free
rules they share (``trainbench.engines.base``, ``engines.devices``). The runner's promises (samples, tokens,
parameters, FLOPs, every layer trained) hold for every (workload x framework) pair the registry supports, the
trainer's (step counts, evaluation, checkpoints) for every pair that trains. Framework-specific behaviour stays in
test_<framework>_engine.py.

Frameworks are imported only inside the tests of their parameter: conftest.py imports torch before anything can
import TensorFlow (the other order crashes the process).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from trainbench import workloads
from trainbench.cli import options
from trainbench.config import DEVICES, BenchConfig, ModelConfig, TrainConfig
from trainbench.data.synthetic import learnable_examples
from trainbench.engines import devices as engine_devices
from trainbench.engines import load_engine
from trainbench.engines.base import CHECKPOINTS_KEPT, Engine, Span, steps_for, synthetic_split
from trainbench.engines.devices import check_precision, resolve_device
from trainbench.errors import UsageError
from trainbench.frameworks import capabilities_of
from trainbench.results.failure import failure_status, is_out_of_memory
from trainbench.results.records import Status

# --- what the contract needs to know about each framework --------------------------------------------------------


@dataclass(frozen=True)
class Framework:
    name: str  # as --framework spells it
    seen_by: str  # who the engine says sees no GPU
    module: str  # the Python package whose version versions() reports under the same key
    checkpoint_glob: str  # one file per complete checkpoint, named by its epoch
    flops_note: str  # how its runner says it counted training FLOPs

    def imported(self) -> Any:
        return pytest.importorskip(self.module)

    def gpu_count(self) -> int:
        if self.name == "torch":
            return self.imported().cuda.device_count()
        return len(self.imported().config.list_physical_devices("GPU"))

    def weights(self, holder: Any) -> list[np.ndarray]:
        """A runner's or a trainer's network state (weights and batch-norm statistics) as numpy copies."""
        if self.name == "torch":
            return [value.detach().cpu().numpy().copy() for value in holder.network.state_dict().values()]
        return [value.copy() for value in holder.network.get_weights()]

    def trainable_parameters(self, runner: Any) -> int:
        """The runner's network's trainable values, counted here."""
        if self.name == "torch":
            return sum(p.numel() for p in runner.network.parameters() if p.requires_grad)
        return sum(math.prod(v.shape) for v in runner.network.trainable_variables)

    def saved_epochs(self, directory: Path) -> list[int]:
        prefix = self.checkpoint_glob.partition("*")[0]
        names = (path.name.removeprefix(prefix) for path in directory.glob(self.checkpoint_glob))
        return sorted(int(name.split(".")[0]) for name in names)

    def allocation_failure(self) -> BaseException:
        """The framework's own error for an allocation no machine can satisfy."""
        if self.name == "torch":
            torch = self.imported()
            with pytest.raises(RuntimeError) as caught:
                torch.empty(10**15)  # 4 PB: more than any address space, whatever the overcommit policy
        else:
            tf = self.imported()
            with pytest.raises(tf.errors.ResourceExhaustedError) as caught:
                tf.zeros([10**6, 10**6])  # 4 TB: refused after the allocator's own 10 s of retrying
        return caught.value

    def other_failure(self) -> BaseException:
        """The framework's own error for a bug that has nothing to do with memory: mismatched matrix shapes."""
        if self.name == "torch":
            torch = self.imported()
            with pytest.raises(RuntimeError) as caught:
                torch.mm(torch.ones(2, 3), torch.ones(4, 5))
        else:
            tf = self.imported()
            with pytest.raises(tf.errors.InvalidArgumentError) as caught:
                tf.matmul(tf.ones([2, 3]), tf.ones([4, 5]))
        return caught.value


FRAMEWORKS = {
    "torch": Framework("torch", "PyTorch", "torch", "epoch-*.pt", "FlopCounterMode, one step (forward and backward)"),
    "tf": Framework("tf", "TensorFlow", "tensorflow", "ckpt-*.index", "x 3 for training"),
}


@pytest.fixture(scope="module", params=list(FRAMEWORKS))
def framework(request: pytest.FixtureRequest) -> Framework:
    found = FRAMEWORKS[request.param]
    found.imported()  # skipped, not failed, where the framework's extra is not installed
    if found.name == "tf":
        pytest.importorskip("official")
    return found


@pytest.fixture(scope="module")
def engine(framework: Framework) -> Engine:
    return load_engine(framework.name)


def model_config(framework: Framework, **overrides: Any) -> ModelConfig:
    settings: dict[str, Any] = {"framework": framework.name, "image_size": 32, "num_classes": 4, "device": "cpu"}
    settings.update(overrides)
    return ModelConfig(**settings)


def train_config(framework: Framework, **overrides: Any) -> TrainConfig:
    """Batches of 4 over 10 training and 6 evaluation examples: both end in a short batch."""
    settings: dict[str, Any] = {
        "model": model_config(framework), "epochs": 2, "batch_size": 4, "warmup_epochs": 0.0, "decay_epochs": (),
        "synthetic_train_examples": 10, "synthetic_eval_examples": 6, "log_every": 1000,
    }
    settings.update(overrides)
    return TrainConfig(**settings)


def needs_no_gpu(framework: Framework) -> None:
    if framework.gpu_count():
        pytest.skip(f"{framework.seen_by} sees a GPU here")


# --- the shared rules, framework-free ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "requested, gpus, expected",
    [("auto", 0, "cpu"), ("auto", 2, "cuda"), ("cpu", 0, "cpu"), ("cpu", 2, "cpu"), ("cuda", 1, "cuda")],
)
def test_resolve_device(requested: str, gpus: int, expected: str) -> None:
    assert resolve_device(requested, gpus, "PyTorch") == expected


def test_resolve_device_refusals_are_one_line_and_say_what_to_do() -> None:
    with pytest.raises(UsageError) as no_gpu:
        resolve_device("cuda", 0, "TensorFlow")
    assert "TensorFlow sees no GPU" in str(no_gpu.value) and "--device cpu or auto" in str(no_gpu.value)
    with pytest.raises(UsageError) as unknown:
        resolve_device("tpu", 8, "TensorFlow")
    assert "'tpu'" in str(unknown.value) and all(device in str(unknown.value) for device in DEVICES)
    assert "\n" not in str(no_gpu.value) + str(unknown.value)


def test_the_command_line_resolves_devices_by_the_same_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    gpus = [0]
    monkeypatch.setattr(engine_devices, "visible_gpu_count", lambda: gpus[0])
    assert options.resolve_device_here is engine_devices.resolve_device_here  # the command line's, and campaigns'
    assert engine_devices.resolve_device_here("auto") == "cpu"
    with pytest.raises(UsageError, match=r"--device cuda: .* sees no GPU; use --device cpu or auto"):
        engine_devices.resolve_device_here("cuda")
    gpus[0] = 2
    assert engine_devices.resolve_device_here("auto") == engine_devices.resolve_device_here("cuda") == "cuda"
    with pytest.raises(UsageError, match="unknown device 'gpu'"):
        engine_devices.resolve_device_here("gpu")
    monkeypatch.setattr(engine_devices, "visible_gpu_count", lambda: pytest.fail("NVML asked about a CPU run"))
    assert engine_devices.resolve_device_here("cpu") == "cpu"


def test_check_precision_refuses_fp16_off_the_gpu_only() -> None:
    with pytest.raises(UsageError, match="fp16 needs a GPU; use --precision bf16 or fp32 on the CPU"):
        check_precision("fp16", "cpu")
    check_precision("fp16", "cuda")
    check_precision("fp16", "cuda:1")  # one process of a torchrun
    check_precision("bf16", "cpu")
    check_precision("fp32", "cpu")


def test_steps_for_is_one_pass_unless_given() -> None:
    assert steps_for(10, 4, None) == 3  # the last batch is short
    assert steps_for(8, 4, None) == 2
    assert steps_for(3, 4, None) == 1
    assert steps_for(10, 4, 7) == 7


def test_the_evaluation_examples_come_right_after_the_training_examples() -> None:
    config = TrainConfig(model=ModelConfig(image_size=32, num_classes=4), synthetic_train_examples=5,
                         synthetic_eval_examples=3)
    train, evaluation = synthetic_split(config)
    assert (train, evaluation) == (Span(0, 5), Span(5, 3))
    whole = learnable_examples(0, 8, 32, 4, config.model.seed)
    for span, arrays in ((train, whole_slice(whole, 0, 5)), (evaluation, whole_slice(whole, 5, 8))):
        for part, expected in zip(learnable_examples(*span, 32, 4, config.model.seed), arrays, strict=True):
            np.testing.assert_array_equal(part, expected)


def whole_slice(arrays: tuple[np.ndarray, ...], start: int, stop: int) -> tuple[np.ndarray, ...]:
    return tuple(array[start:stop] for array in arrays)


# --- each engine: loading, devices, versions ---------------------------------------------------------------------


def test_load_engine_gives_the_named_engine(framework: Framework, engine: Engine) -> None:
    assert engine.name == framework.name
    assert load_engine(framework.name) is engine  # one engine per framework
    assert engine.capabilities is capabilities_of(framework.name)  # the record the harness reads without it


def test_cuda_without_a_gpu_is_refused_naming_the_framework(framework: Framework, engine: Engine) -> None:
    needs_no_gpu(framework)
    model = model_config(framework, device="cuda")
    for build in (lambda: engine.make_runner(BenchConfig(model=model, batch_size=2)),
                  lambda: engine.make_trainer(train_config(framework, model=model))):
        with pytest.raises(UsageError) as error:
            build()
        assert str(error.value) == f"--device cuda: {framework.seen_by} sees no GPU; use --device cpu or auto"


def test_fp16_needs_a_gpu_even_when_auto_falls_back_to_the_cpu(framework: Framework, engine: Engine) -> None:
    needs_no_gpu(framework)
    model = model_config(framework, device="auto", precision="fp16")  # ModelConfig refuses only an explicit cpu
    for build in (lambda: engine.make_runner(BenchConfig(model=model, batch_size=2)),
                  lambda: engine.make_trainer(train_config(framework, model=model))):
        with pytest.raises(UsageError, match="fp16 needs a GPU"):
            build()


def test_versions_name_the_framework_for_env_json(framework: Framework, engine: Engine) -> None:
    versions = engine.versions()
    assert versions[framework.module] == framework.imported().__version__
    assert {"cuda", "cudnn", "devices"} <= versions.keys()
    assert versions["devices"]
    json.dumps(versions)  # it goes into env.json


@pytest.mark.parametrize("name", ["torch", pytest.param("tf", marks=pytest.mark.slow)])  # TF retries for 10 s
def test_a_real_allocation_failure_is_out_of_memory(name: str) -> None:
    framework = FRAMEWORKS[name]
    oom = framework.allocation_failure()
    assert is_out_of_memory(oom)
    assert failure_status(oom) is Status.OOM
    assert is_out_of_memory(wrapped(oom))  # a caller that re-raises keeps the cause
    other = framework.other_failure()
    assert not is_out_of_memory(other)
    assert not is_out_of_memory(wrapped(other))
    assert failure_status(other) is Status.ERROR


def wrapped(error: BaseException) -> BaseException:
    try:
        try:
            raise error
        except BaseException as cause:
            raise RuntimeError("step failed") from cause
    except RuntimeError as outer:
        return outer


# --- each engine: the benchmark runner ---------------------------------------------------------------------------


# Every (workload x framework) pair the registry supports, at --size tiny: the two convolutional ones take seconds a
# step on the CPU even there, so they run with the slow tests.
HEAVY = ("resnet50", "retinanet")
PAIRS = [pytest.param((workload.name, name), id=f"{workload.name}-{name}",
                      marks=[pytest.mark.slow] if workload.name in HEAVY else [])
         for workload in workloads.all_workloads() for name in workload.frameworks]
STEPS = 2


@pytest.fixture(scope="module", params=PAIRS)
def stepped(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A pair's tiny runner at batch 2, its network's state before and after STEPS steps."""
    workload, name = request.param
    framework = FRAMEWORKS[name]
    framework.imported()
    model = ModelConfig(framework=name, workload=workload, size="tiny", device="cpu")
    runner = load_engine(name).make_runner(BenchConfig(model=model, batch_size=2))
    before = framework.weights(runner)
    for _ in range(STEPS):
        runner.step()
    runner.sync()
    return {"model": model, "framework": framework, "runner": runner, "before": before,
            "after": framework.weights(runner)}


def test_every_pair_counts_its_samples_tokens_parameters_and_flops(stepped: dict[str, Any]) -> None:
    model, framework, runner = stepped["model"], stepped["framework"], stepped["runner"]
    assert runner.samples_per_step == 2  # one device: the batch
    assert runner.compile_s is None  # nothing compiled ahead of the windows without --compile or --cuda-graph
    tokens = model.spec.tokens_per_sample(model.params())  # the descriptor's count: a pair's target tokens
    assert runner.tokens_per_step == (None if tokens is None else 2 * tokens)
    assert runner.parameters == framework.trainable_parameters(runner) > 0
    assert framework.flops_note in runner.flops_note
    # A weight that multiplies once a sample costs 6 flops (2 forward, 4 backward); embeddings that are only looked
    # up cost none: 2 x the parameters is a floor every workload clears (a step not followed would count 0).
    assert runner.train_flops_per_sample >= 2 * runner.parameters


# Bytes of per-parameter state an fp32 parameter costs each optimizer: SGD's momentum; Adam's and AdamW's two moments.
STATE_PER_PARAMETER = {"sgd": 4, "adam": 8, "adamw": 8}


def test_every_pair_records_how_its_step_ran_and_what_it_holds(stepped: dict[str, Any]) -> None:
    """The reference optimizer, the fp32 products as set, and memory by holder: fp32 parameters 4 bytes each, their
    gradients as many, the optimizer's per-parameter state 4 (SGD) or 8 (Adam, AdamW) bytes a parameter."""
    model, runner = stepped["model"], stepped["runner"]
    reference = model.spec.optimizer.name
    record = runner.step_record
    assert record["matmul_precision"] == "highest"  # ModelConfig's default, read back from the framework
    assert record["optimizer"].startswith(f"{reference} (")
    assert record["image_layout"] == (None if "channels_last" in model.spec.unsupported
                                      else "NHWC" if model.framework == "tf" else "NCHW")
    # PyTorch names the attention kernel its step ran (the CPU's training steps: math where dropout rules the CPU's
    # flash kernel out; Llama has no dropout); TensorFlow cannot tell, and an image network runs none.
    attends = model.framework == "torch" and "channels_last" in model.spec.unsupported
    kernel = "flash (cpu)" if model.workload == "llama" else "math"
    assert record["attention_kernel"] == (kernel if attends else None)
    # PyTorch counts its step's host reads: none, but torchvision RetinaNet's loss, 9 an image (batch 2 here).
    syncs = (18 if model.workload == "retinanet" else 0) if model.framework == "torch" else None
    assert record["host_syncs_per_step"] == syncs
    # One process, nothing recomputed: it holds every parameter, and the hardware runs the model's FLOPs.
    assert (record["activation_checkpointing"], record["shard"]) == ("none", None)
    assert runner.parameters_held == runner.parameters
    assert runner.hardware_flops_per_sample == runner.train_flops_per_sample
    memory = runner.memory()
    parameters = runner.parameters
    assert memory.parameters == memory.gradients == 4 * parameters
    assert memory.optimizer_state == STATE_PER_PARAMETER[reference] * parameters
    assert memory.optimizer_state <= memory.optimizer < memory.optimizer_state + 1024  # + step counters only
    if model.framework == "torch":
        assert memory.activations > 0
    else:
        assert memory.activations is None and "TensorFlow does not tell" in memory.note
    losses = runner.take_losses()
    assert len(losses) == STEPS and all(math.isfinite(loss) and loss > 0 for loss in losses)
    assert runner.take_losses() == []  # taken once
    assert runner.loss_scale() is None  # fp32: no loss scaler
    assert runner.peak_memory() == (None, "")  # the CPU: the harness reads the process's resident peak


def test_every_pair_trains_every_layer(stepped: dict[str, Any]) -> None:
    before, after = stepped["before"], stepped["after"]
    assert len(after) == len(before) > 0
    assert all(np.isfinite(array).all() for array in after)
    # The optimizer reached the network, not one stray layer: most tensors moved (SGD with momentum, weight decay;
    # batch-norm statistics too). What stays is an embedding row or a head no synthetic batch reaches.
    moved = sum(not np.array_equal(old, new) for old, new in zip(before, after, strict=True))
    assert moved > len(after) // 2, (moved, len(after))


@pytest.mark.slow
def test_a_missing_data_folder_is_a_usage_error_naming_it(framework: Framework, engine: Engine,
                                                          tmp_path: Path) -> None:
    missing = str(tmp_path / "imagenet")
    model = model_config(framework, image_size=224)  # TensorFlow builds its model fastest at 224 px
    for build in (lambda: engine.make_runner(BenchConfig(model=model, batch_size=2, data=missing)),
                  lambda: engine.make_trainer(train_config(framework, model=model, data=missing))):
        with pytest.raises(UsageError, match=r"imagenet.*does not exist"):
            build()


# --- each engine: the trainer ------------------------------------------------------------------------------------


# Every workload `train` trains (a learnable set), in each framework that builds it.
TRAINED = [pytest.param((workload.name, name), id=f"{workload.name}-{name}")
           for workload in workloads.all_workloads() if workload.learnable_set is not None
           for name in workload.frameworks]


@pytest.fixture(scope="module", params=TRAINED)
def trained_model(request: pytest.FixtureRequest) -> ModelConfig:
    """The workload at --size tiny (an image classifier on 32 px images of 4 classes: every label in the top 5)."""
    workload, name = request.param
    FRAMEWORKS[name].imported()
    shape = {"image_size": 32, "num_classes": 4} if workloads.get(workload).learnable_set == "images" else {}
    return ModelConfig(framework=name, workload=workload, size="tiny", device="cpu", **shape)


@pytest.fixture(scope="module")
def trainer(trained_model: ModelConfig) -> Any:
    framework = FRAMEWORKS[trained_model.framework]
    return load_engine(framework.name).make_trainer(train_config(framework, model=trained_model))


@pytest.fixture(scope="module")
def other_trainer(trained_model: ModelConfig) -> Any:
    """A second trainer, untrained, with step counts given instead of derived."""
    framework = FRAMEWORKS[trained_model.framework]
    return load_engine(framework.name).make_trainer(train_config(framework, model=trained_model, steps_per_epoch=5,
                                                                 eval_steps=7))


@pytest.mark.slow
def test_step_counts_are_one_pass_over_each_set_unless_given(trainer: Any, other_trainer: Any) -> None:
    assert (trainer.global_batch, trainer.steps_per_epoch, trainer.eval_steps) == (4, math.ceil(10 / 4), 2)
    assert (other_trainer.global_batch, other_trainer.steps_per_epoch, other_trainer.eval_steps) == (4, 5, 7)
    assert trainer.is_primary  # one process


@pytest.mark.slow
def test_evaluate_sees_every_evaluation_example_once(trainer: Any, trained_model: ModelConfig) -> None:
    result = trainer.evaluate()
    assert result.keys() == {"loss", "top1", "top5", "examples"}
    assert result["examples"] == 6  # two batches: 4, then the 2 left, and nothing counted twice (sequences: not tokens)
    assert 0 <= result["top1"] <= result["top5"] <= 1.0
    if trained_model.spec.learnable_set == "images":
        assert result["top5"] == 1.0  # top-5 of 4 classes holds every one
    assert math.isfinite(result["loss"]) and result["loss"] > 0


@pytest.mark.slow
def test_mean_loss_averages_the_steps_since_the_last_call(trainer: Any) -> None:
    trainer.mean_loss()  # whatever an earlier test left
    assert math.isnan(trainer.mean_loss())  # no step since the previous call
    trainer.train_step(0.01)
    trainer.train_step(0.01)
    first = trainer.mean_loss()
    assert math.isfinite(first) and first > 0
    assert math.isnan(trainer.mean_loss())


@pytest.mark.slow
def test_checkpoints_restore_exactly_and_only_the_newest_are_kept(
    trained_model: ModelConfig, trainer: Any, other_trainer: Any, tmp_path: Path
) -> None:
    framework = FRAMEWORKS[trained_model.framework]
    assert other_trainer.restore(tmp_path / "empty") == 0
    trainer.train_step(0.01)  # weights and momentum now differ from a fresh trainer's
    trainer.mean_loss()
    epochs = range(1, CHECKPOINTS_KEPT + 2)
    for epoch in epochs:
        trainer.save(tmp_path, epoch)
    assert framework.saved_epochs(tmp_path) == list(epochs)[-CHECKPOINTS_KEPT:]  # the oldest was deleted
    saved = framework.weights(trainer)
    assert not all(np.array_equal(a, b) for a, b in zip(framework.weights(other_trainer), saved, strict=True))
    assert other_trainer.restore(tmp_path) == epochs[-1]
    for restored, original in zip(framework.weights(other_trainer), saved, strict=True):
        np.testing.assert_array_equal(restored, original)
