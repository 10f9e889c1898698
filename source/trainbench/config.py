"""Typed configurations for the jobs, instead of loose flag dictionaries.

A configuration is validated once, when it is built, so engines and workers can trust it. Each default and each
list of names is written once, here: the command line takes its defaults from these dataclasses (``field_default``)
and its bounds checks from ``int_problem`` and ``float_problem``.

Which settings go together is answered once, by ``problems``: the configurations refuse its first answer when built,
the command line asks it with the launch, profiler and input it was given, a campaign's legality filter asks it of
each combination of axes, and the engines ask it again once 'auto' is resolved to a device. ``model_config_from``
is the one builder of a ModelConfig from the command line's or a campaign's values.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast, get_args

from trainbench import workloads
from trainbench.errors import UsageError
from trainbench.frameworks import FRAMEWORKS, Framework, Loader, capabilities_of, owner_of
from trainbench.results.records import unstamped
from trainbench.workloads import settings as shape_settings
from trainbench.workloads.resnet50 import RESNET50

Precision = Literal["fp32", "fp16", "bf16"]
Device = Literal["auto", "cpu", "cuda"]
Profiler = Literal["ncu", "nsys", "nvprof", "torch", "tf"]
# torch.compile's modes: "reduce-overhead" and "max-autotune" replay the compiled step as CUDA graphs.
CompileMode = Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"]
OptimizerName = Literal["sgd", "adam", "adamw"]
# fp32's matrix products and convolutions: "highest" keeps them fp32; "high" lets them run in TF32 where the GPU has it
# (TensorFlow's default, not PyTorch's): set explicitly in both engines, so a comparison holds the arithmetic equal.
MatmulPrecision = Literal["highest", "high"]
# Activations kept for the backward pass: all of them, or ("full") only each block's input, the block's forward run
# again in the backward pass (torch.utils.checkpoint per transformer block, as torchtitan's "full" mode).
ActivationCheckpointing = Literal["none", "full"]
# How several processes hold the model: each a replica (DistributedDataParallel), or each a shard of every
# parameter, gradient and optimizer state (FSDP2's fully_shard per block, gathered for each block's forward).
Shard = Literal["ddp", "fsdp"]

PRECISIONS: tuple[Precision, ...] = get_args(Precision)
DEVICES: tuple[Device, ...] = get_args(Device)
PROFILERS: tuple[Profiler, ...] = get_args(Profiler)
COMPILE_MODES: tuple[CompileMode, ...] = get_args(CompileMode)
LOADERS: tuple[Loader, ...] = get_args(Loader)
OPTIMIZERS: tuple[OptimizerName, ...] = get_args(OptimizerName)
MATMUL_PRECISIONS: tuple[MatmulPrecision, ...] = get_args(MatmulPrecision)
ACTIVATION_CHECKPOINTINGS: tuple[ActivationCheckpointing, ...] = get_args(ActivationCheckpointing)
SHARDS: tuple[Shard, ...] = get_args(Shard)
GPU_PROFILERS: tuple[Profiler, ...] = ("ncu", "nsys", "nvprof")  # run the worker under them; profile GPU kernels
FRAMEWORK_PROFILERS: tuple[Profiler, ...] = ("torch", "tf")  # the framework's own profiler: that framework only

# The original suite's sweep on a GPU; the CPU default is short so a laptop finishes in minutes.
GPU_BATCH_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 96, 128)
CPU_BATCH_SIZES: tuple[int, ...] = (1, 2, 4)

# Upper bounds: far beyond any real run, low enough that a typo fails at once with one line instead of looping for
# hours or overflowing a framework's integer shapes.
# 2**24 images are 206 GB of fp32 input even at 32 px, beyond any one device; published ImageNet global batches stop
# near 64k. Up to this bound a batch that cannot be allocated is a recorded allocation failure, not a refusal.
MAX_BATCH_SIZE = 2**24
MAX_COUNT = 10**9  # steps, iterations, epochs, windows, repetitions, examples: 10**9 steps of any size would take years
# The image bounds are the workload's, written once in its descriptor (workloads/resnet50.py).
MIN_IMAGE_SIZE, MAX_IMAGE_SIZE = RESNET50.params["image_size"].minimum, RESNET50.params["image_size"].maximum
MIN_NUM_CLASSES, MAX_NUM_CLASSES = RESNET50.params["num_classes"].minimum, RESNET50.params["num_classes"].maximum
MAX_SEED = 2**32 - 1  # numpy's and TensorFlow's seeds are unsigned 32-bit
MAX_WORKERS = 1024  # input pipeline processes or threads
# GPU timeline period, seconds: 0 is off; below 10 ms the sampler's NVML queries would compete with the training
# loop for the GIL (measure its cost with benchmarks/telemetry_overhead.py), above a minute it says nothing.
MIN_TELEMETRY_INTERVAL_S, MAX_TELEMETRY_INTERVAL_S = 0.01, 60.0


# --- checks: the one bounds check per kind of number, for the dataclasses below and the command line's types ------


def int_problem(value: Any, minimum: int = 1, maximum: int = MAX_COUNT) -> str | None:
    """What is wrong with a whole number given for a setting, or None when it is one within [minimum, maximum].

    Anything but an integer (a float, a string or a bool from a hand-edited JSON file) is a problem too."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and minimum <= int(value) <= maximum:
        return None
    return f"must be a whole number from {minimum} to {maximum}, got {value!r}"


def float_problem(value: Any, minimum: float, maximum: float = math.inf, *, above: bool = False,
                  below: bool = False) -> str | None:
    """What is wrong with a number given for a setting, or None when it is finite and within the bounds
    (``above``/``below``: the bound itself is excluded). NaN compares false to everything, so it is caught here."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        number = float(value)  # the numbers ABCs declare no comparison with a float
        low_ok = number > minimum if above else number >= minimum
        high_ok = number < maximum if below else number <= maximum
        if low_ok and high_ok:
            return None
    bounds = [f"{'above' if above else 'at least'} {minimum:g}"]
    if math.isfinite(maximum):
        bounds.append(f"{'below' if below else 'at most'} {maximum:g}")
    return f"must be a finite number {' and '.join(bounds)}, got {value!r}"


def telemetry_interval_problem(value: Any) -> str | None:
    """0 (no timeline) or a period from MIN_ to MAX_TELEMETRY_INTERVAL_S seconds."""
    if value == 0 and not isinstance(value, bool):
        return None
    problem = float_problem(value, MIN_TELEMETRY_INTERVAL_S, MAX_TELEMETRY_INTERVAL_S)
    return problem and f"must be 0 (no timeline) or from {MIN_TELEMETRY_INTERVAL_S:g} to " \
                       f"{MAX_TELEMETRY_INTERVAL_S:g} seconds, got {value!r}"


def check(name: str, problem: str | None) -> None:
    """Raise the problem as a UsageError naming the setting ("batch size must be ...")."""
    if problem is not None:
        raise UsageError(f"{name} {problem}")


def check_choice(name: str, value: Any, allowed: tuple[str, ...]) -> None:
    """An unknown name is a UsageError: "unknown framework 'mxnet': choose one of tf, torch"."""
    if not (isinstance(value, str) and value in allowed):
        raise UsageError(f"unknown {name} {value!r}: choose one of {', '.join(allowed)}")


Choice = TypeVar("Choice", bound=str)


def choice(name: str, value: Any, allowed: tuple[Choice, ...]) -> Choice:
    """``value`` checked by check_choice, typed as one of ``allowed`` (a Literal): for plain strings from outside."""
    check_choice(name, value, allowed)
    return value


def field_default(config_class: type, name: str) -> Any:
    """The default of a configuration's field, for a command-line option's ``default=`` and its help text."""
    for item in dataclasses.fields(config_class):
        if item.name != name:
            continue
        if item.default is not dataclasses.MISSING:
            return item.default
        if item.default_factory is not dataclasses.MISSING:
            return item.default_factory()
        break
    raise LookupError(f"{config_class.__name__}.{name} has no default")  # a programming error, not bad input


# --- the configurations ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    """What is trained and how: shared by the throughput benchmark and end-to-end training."""

    framework: Framework = "torch"
    precision: Precision = "fp32"
    workload: str = workloads.DEFAULT  # a name in the workload registry (trainbench.workloads)
    size: str = "full"  # the workload's published network, or "tiny" (CPU tests, the demo)
    # The workload's shape settings (its descriptor's params): None is the workload's default at this size; read
    # them with param(). Setting one the workload does not have is refused.
    image_size: int | None = None
    num_classes: int | None = None
    seq_len: int | None = None
    device: Device = "auto"
    xla: bool = False  # TensorFlow: jit_compile the training step
    compile: bool = False  # PyTorch: torch.compile the model
    compile_mode: CompileMode = "default"  # PyTorch: torch.compile's mode, with compile
    cuda_graph: bool = False  # PyTorch: capture the whole eager step (forward, backward, update) as one CUDA graph
    channels_last: bool = False  # PyTorch: NHWC memory layout
    seed: int = 0
    # fp32 products: true fp32 by default, so fp32 means fp32 in both frameworks and MFU is measured against the
    # fp32 peak; "high" (TF32) is what TensorFlow and NVIDIA's containers run unless told otherwise.
    matmul_precision: MatmulPrecision = "highest"
    activation_checkpointing: ActivationCheckpointing = "none"  # PyTorch: recompute each block's forward
    shard: Shard = "ddp"  # PyTorch under torchrun (--gpus, --nodes, --torchrun): replicas or FSDP shards

    def __post_init__(self) -> None:
        check_choice("framework", self.framework, FRAMEWORKS)
        check_choice("precision", self.precision, PRECISIONS)
        check_choice("device", self.device, DEVICES)
        check_choice("compile mode", self.compile_mode, COMPILE_MODES)
        check_choice("matmul precision", self.matmul_precision, MATMUL_PRECISIONS)
        check_choice("activation checkpointing", self.activation_checkpointing, ACTIVATION_CHECKPOINTINGS)
        check_choice("shard", self.shard, SHARDS)
        check_choice("workload", self.workload, workloads.names())
        workload = workloads.get(self.workload)
        check_choice("size", self.size, tuple(workload.sizes))
        for name in PARAM_FIELDS:
            value = getattr(self, name)
            if value is not None and name in workload.params:
                minimum, maximum = workload.bounds(name, self.size)
                own = maximum < workload.params[name].maximum  # this size's own bound: say which size
                check(f"{PARAM_NAMES[name]} of --size {self.size} {self.workload}" if own else PARAM_NAMES[name],
                      int_problem(value, minimum, maximum))
        check("seed", int_problem(self.seed, 0, MAX_SEED))
        refuse(problems(self))

    @property
    def spec(self) -> workloads.Workload:
        """The workload's descriptor."""
        return workloads.get(self.workload)

    def param(self, name: str) -> int:
        """A shape setting as run: as given, else the workload's default at this size."""
        value = getattr(self, name)
        return self.spec.default(name, self.size) if value is None else value

    def params(self) -> dict[str, int]:
        """Every shape setting the workload has, as run."""
        return {name: self.param(name) for name in self.spec.params}


# The shape settings a ModelConfig can carry (the union of the registered workloads' params), and their names in
# messages: declared once in workloads.settings. A workload's descriptor says which apply to it.
PARAM_FIELDS: tuple[str, ...] = shape_settings.NAMES
PARAM_NAMES: dict[str, str] = {setting.name: setting.words for setting in shape_settings.SETTINGS}


def uses_cuda_graphs(model: ModelConfig) -> bool:
    """Whether the timed step replays CUDA graphs: captured by us, or by torch.compile's reduce-overhead or
    max-autotune mode."""
    return model.cuda_graph or (model.compile and model.compile_mode in ("reduce-overhead", "max-autotune"))


# --- which settings go together: one function for the command line, campaigns, engines and profilers -------------

# A setting only one framework reads (a switch, or a choice other than its default): the other would ignore it and
# still record it.
FRAMEWORK_FLAGS: dict[str, tuple[Framework, str]] = {
    "xla": ("tf", "PyTorch compiles its step with --compile"),
    "compile": ("torch", "TensorFlow compiles its step with --xla"),
    "cuda_graph": ("torch", "TensorFlow compiles its step with --xla"),
    "channels_last": ("torch", "TensorFlow's input is NHWC already"),
    "activation_checkpointing": ("torch", "TensorFlow's engine keeps every activation"),
    "shard": ("torch", "TensorFlow's MirroredStrategy keeps a replica of every variable on each GPU"),
}


def problems(model: ModelConfig, *, device: str | None = None, launch: LaunchConfig | None = None,
             profiler: str | None = None, loader: str | None = None, data: str | None = None) -> list[str]:
    """Why these settings cannot run together, one reason per rule (the first one shown); [] when they can.

    ``device``: the device to judge on where it is not ``model.device`` (an engine's resolved one; the command
    line's as asked, since a GPU profiler is refused only on an explicit cpu). 'auto' is judged once resolved.
    ``launch``, ``profiler`` and ``loader`` (with ``data``, None for synthetic input) are judged when given.
    ModelConfig, BenchConfig and TrainConfig refuse the first problem when built, so a configuration that exists
    passes; campaigns drop the combinations that have one (campaign.matrix.illegal)."""
    device = device or model.device
    found = [*workload_problems(model, data), *_framework_flag_problems(model), step_mode_problem(model, device)]
    if profiler is not None:
        found.append(profiler_problem(profiler, model.framework, device))
    if launch is not None and (problem := launch.problem_for(model.framework)):
        found.append(f"--gpus {launch.processes_per_node}: {problem}; choose its GPUs with CUDA_VISIBLE_DEVICES")
    if launch is not None:
        found.append(launch_problem(model, launch, profiler))
    if loader is not None:
        found.append(loader_problem(loader, model.framework, data, device))
        if loader == "gpu" and data is not None and not model.spec.image_input:
            found.append(f"--loader gpu decodes ImageNet's JPEG images on the GPU; --workload {model.workload}'s "
                         "records are decoded and resized in the CPU workers: use --loader cpu")
    return [problem for problem in found if problem is not None]


def refuse(found: list[str]) -> None:
    """Raise the first of ``problems``' answer as a UsageError."""
    if found:
        raise UsageError(found[0])


def workload_problems(model: ModelConfig, data: str | None = None) -> list[str | None]:
    """Why the workload cannot run as asked: a framework without its implementation, a shape setting it does not
    have, a setting its descriptor marks unsupported (channels_last on a transformer), or --data it cannot read."""
    workload = model.spec
    found: list[str | None] = [workload.framework_problem(model.framework)]
    found += [f"--{name.replace('_', '-')} does not apply to --workload {model.workload} (its settings: "
              f"{', '.join(workload.params) or 'none'})"
              for name in PARAM_FIELDS if getattr(model, name) is not None and name not in workload.params]
    found += [f"--{name.replace('_', '-')} does not apply to --workload {model.workload}: {why}"
              for name, why in workload.unsupported.items()
              if getattr(model, name, False) not in (False, field_default(ModelConfig, name))]
    if data is not None and model.framework not in workload.data:
        found.append(f"--data: --workload {model.workload} runs on synthetic data only for now (drop --data)")
    return found


def train_data_problem(model: ModelConfig) -> str | None:
    """Why ``train --data`` refuses the workload, or None: only the image pipelines feed training end to end so far
    (the record pipelines feed throughput, profile and input-bench; ``Workload.trains_on_data``)."""
    if model.spec.trains_on_data:
        return None
    workload = model.workload
    return (f"train --data: --workload {workload} trains end to end on its learnable synthetic set only for now "
            f"(drop --data); measure it on real data with 'throughput --workload {workload} --data DIR'")


def _framework_flag_problems(model: ModelConfig) -> list[str]:
    found = []
    for name, (owner, hint) in FRAMEWORK_FLAGS.items():
        value = getattr(model, name)
        if model.framework != owner and value != field_default(ModelConfig, name):
            option = f"--{name.replace('_', '-')}" + ("" if isinstance(value, bool) else f" {value}")
            found.append(f"{option} is {capabilities_of(owner).title}'s (--framework {owner}); {hint}")
    return found


def step_mode_problem(model: ModelConfig, device: str) -> str | None:
    """Why the step's precision, compile or graph settings cannot run on ``device`` ('auto' is judged once
    resolved), or None."""
    if model.compile_mode != "default" and not model.compile:  # only a file can say so: the option implies --compile
        return f"compile mode {model.compile_mode!r} without compile: torch.compile would not run"
    if model.compile and model.cuda_graph:
        return ("--cuda-graph captures the eager step; the compiled step's CUDA graphs are --compile "
                "reduce-overhead: choose one")
    if model.cuda_graph and model.precision == "fp16":
        return "--cuda-graph cannot capture fp16's loss scaling (it reads the GPU every step); use bf16"
    if model.precision == "fp16" and device == "cpu":
        return "fp16 needs a GPU; use --precision bf16 or fp32 on the CPU"
    if device == "cpu" and uses_cuda_graphs(model):
        what = "--cuda-graph" if model.cuda_graph else f"--compile {model.compile_mode}"
        return f"{what} replays CUDA graphs and needs a GPU; on the CPU use --compile default or none"
    return None


def launch_problem(model: ModelConfig, launch: LaunchConfig, profiler: str | None = None) -> str | None:
    """Why the step mode or the profiler cannot run under ``launch``'s processes, or None. Judged before anything
    starts: the engine would otherwise find out after the process group, the model and the loaders exist."""
    launched = capabilities_of(model.framework).launcher == "torchrun"  # else one process per node, never torchrun
    under_torchrun = launched and (launch.distributed or launch.torchrun)
    if model.shard == "fsdp" and not under_torchrun:
        return ("--shard fsdp shards the model over several processes: launch them with --gpus N (or --nodes, or "
                "--torchrun for one)")
    if model.shard == "fsdp" and model.precision == "fp16":
        return ("--shard fsdp runs fp32 or bf16 (as torchtitan does): fp16's loss scaling is not built for sharded "
                "gradients; use --precision bf16")
    if model.cuda_graph and under_torchrun:
        return ("--cuda-graph captures one process's eager step (DDP's all-reduce hooks run between its kernels); "
                "with --gpus or --torchrun use --compile reduce-overhead")
    if profiler == "ncu" and launch.world_size > 1:
        return (f"ncu cannot profile {launch.world_size} processes: it replays every kernel alone, and an NCCL "
                "kernel waits for its peers forever; profile one GPU (--gpus 1), or use nsys")
    if profiler == "nvprof" and under_torchrun:
        return ("nvprof would profile torchrun's agent, which runs no kernel, not its workers: profile one process "
                "(drop --gpus and --torchrun), or use nsys")
    return None


def profiler_problem(profiler: str, framework: str, device: str) -> str | None:
    """Why ``profiler`` cannot profile this run, or None: a framework's profiler sees that framework only; the GPU
    profilers see GPU kernels, so an explicit cpu is refused ('auto' falling back to the CPU is only warned
    about: nvidia-smi may list a GPU that this process cannot see)."""
    check_choice("profiler", profiler, PROFILERS)
    if profiler in FRAMEWORK_PROFILERS and profiler != framework:
        return f"the {profiler} profiler profiles the {profiler} engine: add --framework {profiler}"
    if profiler in GPU_PROFILERS and device == "cpu":
        return f"{profiler} profiles GPU kernels: drop --device cpu (or use the torch or tf profiler)"
    return None


def loader_problem(loader: str, framework: str, data: str | None, device: str) -> str | None:
    """Why input ``loader`` cannot feed this run ('auto' devices are judged once resolved), or None."""
    check_choice("loader", loader, LOADERS)
    if loader == "cpu":
        return None
    if loader not in (capabilities := capabilities_of(framework)).loaders:
        return (f"--loader {loader} is {owner_of(loader).title}'s; {capabilities.title}'s input is "
                f"{capabilities.input_pipeline} on the CPU")
    if data is None:
        return "--loader gpu decodes real images: give --data DIR"
    if device == "cpu":
        return "--loader gpu decodes on a GPU; on the CPU use --loader cpu"
    return None


# --- one builder of ModelConfig from values --------------------------------------------------------------------


def compile_fields(value: Any) -> dict[str, Any]:
    """``compile`` as the command line (None, or a mode) and matrices (true/false, or a mode) give it, as
    ModelConfig's two fields."""
    if value is None or value is False:
        return {"compile": False}
    if value is True:
        return {"compile": True}
    return {"compile": True, "compile_mode": value}


def model_config_from(values: Mapping[str, Any]) -> ModelConfig:
    """A ModelConfig from the command line's options (``vars(args)``) or a campaign experiment's axis values: the
    keys named like its fields are taken (``compile`` as compile_fields reads it), a key absent or None keeps the
    field's default, other keys are ignored. The caller resolves the device and the data's classes, if it must."""
    names = {item.name for item in dataclasses.fields(ModelConfig)} - {"compile", "compile_mode"}
    chosen = {name: values[name] for name in names if values.get(name) is not None}
    return ModelConfig(**chosen, **compile_fields(values.get("compile")))


@dataclass(frozen=True)
class OptimizerConfig:
    """SGD with momentum, as the original suite trained ResNet-50; Adam, as the Transformer's references; or AdamW
    (decoupled weight decay), as the language models' references train (BERT does not learn its masked tokens under
    SGD at any stable rate). Timed runs take the workload's reference (``reference``)."""

    name: OptimizerName = "sgd"
    momentum: float = 0.9  # SGD's
    base_learning_rate: float = 0.1  # per 256 samples; scaled linearly with the global batch
    weight_decay: float = 1e-4  # Adam's is L2 in the gradient, AdamW's decoupled, SGD's L2
    label_smoothing: float = 0.0
    beta2: float = 0.999  # Adam's and AdamW's second-moment decay (beta1: 0.9)

    def __post_init__(self) -> None:
        check_choice("optimizer", self.name, OPTIMIZERS)
        check("momentum", float_problem(self.momentum, 0.0, 1.0, below=True))
        check("learning rate", float_problem(self.base_learning_rate, 0.0, above=True))
        check("weight decay", float_problem(self.weight_decay, 0.0))
        check("label smoothing", float_problem(self.label_smoothing, 0.0, 1.0, below=True))
        check("beta2", float_problem(self.beta2, 0.0, 1.0, below=True))

    def learning_rate(self, global_batch: int) -> float:
        return self.base_learning_rate * global_batch / 256

    @classmethod
    def reference(cls, workload: str, name: str | None = None) -> OptimizerConfig:
        """The workload's reference optimizer (its descriptor's), or ``name`` in its place: the reference's settings
        when it names the reference's optimizer, else that optimizer's usual ones (``OTHER_OPTIMIZERS``) with the
        reference's label smoothing (a property of the task's loss, not of the optimizer)."""
        reference = workloads.get(workload).optimizer
        if name is None or name == reference.name:
            return cls(name=choice("optimizer", reference.name, OPTIMIZERS), momentum=reference.momentum,
                       base_learning_rate=reference.base_learning_rate, weight_decay=reference.weight_decay,
                       label_smoothing=reference.label_smoothing, beta2=reference.beta2)
        chosen = choice("optimizer", name, OPTIMIZERS)
        learning_rate, weight_decay = OTHER_OPTIMIZERS[chosen]
        return cls(name=chosen, base_learning_rate=learning_rate, weight_decay=weight_decay,
                   label_smoothing=reference.label_smoothing)


# An optimizer chosen in place of the workload's reference: (learning rate per 256 samples, weight decay), the values
# PyTorch and tf_keras document as their defaults (SGD: the original suite's). Only the step's cost is compared then;
# none of these is tuned for any one workload.
OTHER_OPTIMIZERS: dict[str, tuple[float, float]] = {"sgd": (0.1, 1e-4), "adam": (1e-3, 0.0), "adamw": (1e-3, 0.01)}


@dataclass(frozen=True)
class ProfileConfig:
    """Which profiler covers which iterations: exactly [start_iteration, start_iteration + iterations)."""

    tool: Profiler
    start_iteration: int = 1  # iterations before it run unprofiled (cuDNN autotuning, allocator warm-up)
    iterations: int = 5
    trace_dir: str | None = None  # torch / tf: where the framework profiler writes its trace

    def __post_init__(self) -> None:
        check_choice("profiler", self.tool, PROFILERS)
        check("start iteration", int_problem(self.start_iteration, 0))
        check("profiled iterations", int_problem(self.iterations))

    @property
    def stop_iteration(self) -> int:
        """The first iteration after the window."""
        return self.start_iteration + self.iterations


MAX_PROCESSES = 1024  # processes per node (GPUs per node) and nodes of one launch


def endpoint_problem(text: str) -> str | None:
    """What is wrong with a HOST:PORT rendezvous address (an IPv6 host in brackets: [::1]:29400), or None."""
    host, colon, port = text.rpartition(":")
    if not colon or not host or host in ("[]",):
        return "not HOST:PORT (a host name or address, a colon, a port)"
    if host.count(":") and not (host.startswith("[") and host.endswith("]")):
        return "an IPv6 host goes in brackets: [ADDRESS]:PORT"
    if not port.isdigit() or not 1 <= int(port) <= 65535:
        return f"port {port!r} is not a number from 1 to 65535"
    if any(c.isspace() for c in host) or "/" in host:
        return f"host {host!r} is not a host name or address"
    return None


@dataclass(frozen=True)
class LaunchConfig:
    """How many processes measure or train together (PyTorch: a torchrun launch, one process per GPU; TensorFlow:
    MirroredStrategy over a node's GPUs, MultiWorkerMirroredStrategy across nodes through TF_CONFIG or Slurm).
    1 x 1 is the plain single-process worker."""

    processes_per_node: int = 1  # --gpus: one process per GPU (on the CPU: processes, gloo)
    nodes: int = 1  # --nodes: with more than one, every node runs the same command with the same rendezvous
    rdzv_endpoint: str | None = None  # HOST:PORT of the c10d rendezvous (several nodes); None: this node alone
    rdzv_id: str | None = None  # the job's name for the rendezvous (Slurm: the job id)
    torchrun: bool = False  # PyTorch: launch through torchrun (and DDP) even with one process, to compare the paths

    def __post_init__(self) -> None:
        check("processes per node", int_problem(self.processes_per_node, 1, MAX_PROCESSES))
        check("nodes", int_problem(self.nodes, 1, MAX_PROCESSES))
        if self.nodes > 1 and not self.rdzv_endpoint:
            raise UsageError("--nodes above 1 needs --rdzv-endpoint HOST:PORT (the node every node can reach)")
        if self.rdzv_endpoint is not None and (problem := endpoint_problem(self.rdzv_endpoint)):
            raise UsageError(f"--rdzv-endpoint {self.rdzv_endpoint!r}: {problem}")

    @property
    def world_size(self) -> int:
        return self.processes_per_node * self.nodes

    def problem_for(self, framework: str) -> str | None:
        """Why ``framework`` cannot run this launch, or None (the command line and campaigns ask the same)."""
        if (capabilities := capabilities_of(framework)).drives_every_gpu and self.processes_per_node > 1:
            return f"{capabilities.title} drives every visible GPU from one process ({capabilities.multi_gpu})"
        return None

    def rendezvous_problem(self, framework: str) -> str | None:
        """Why --rdzv-endpoint/--rdzv-id would be recorded but never used on this one node, or None (with several
        nodes every node is given them, whatever the framework: Slurm's script passes the same options to all)."""
        if (self.rdzv_endpoint is None and self.rdzv_id is None) or self.nodes > 1:
            return None
        if (capabilities := capabilities_of(framework)).launcher != "torchrun":  # its process finds the others itself
            return f"--rdzv-endpoint/--rdzv-id: {capabilities.title} on one node meets no other worker; drop them"
        if not (self.distributed or self.torchrun):
            return "--rdzv-endpoint/--rdzv-id: used only by a torchrun launch (--gpus or --nodes above 1, or " \
                "--torchrun); one process here would ignore them"
        return None

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


@dataclass(frozen=True)
class BenchConfig:
    """One throughput measurement: a model configuration at one batch size."""

    model: ModelConfig
    batch_size: int
    # None: the workload's reference optimizer (OptimizerConfig.reference), set when built: never None once built.
    optimizer: OptimizerConfig = cast(OptimizerConfig, None)  # noqa: RUF009 - a constant None, typed for the readers
    warmup_steps: int = 10
    steps: int = 50
    data: str | None = None  # None: synthetic batches generated on the device
    loader: Loader = "cpu"  # with data (PyTorch): where images are decoded and augmented
    sync_every_step: bool = False
    windows: int = 1  # timed windows of ``steps`` steps each, back to back after one warm-up: a spread of images/s
    profile: ProfileConfig | None = None  # set: run the profiler's window instead of a timed measurement
    telemetry_interval_s: float = 0.1  # GPU timeline sampling period; 0: no timeline (edge counters still read)
    launch: LaunchConfig = field(default_factory=LaunchConfig)  # batch_size is per process (per GPU)

    def __post_init__(self) -> None:
        if self.optimizer is None:
            object.__setattr__(self, "optimizer", OptimizerConfig.reference(self.model.workload))
        check("batch size", int_problem(self.batch_size, 1, MAX_BATCH_SIZE))
        check("warm-up steps", int_problem(self.warmup_steps, 0))
        check("timed steps", int_problem(self.steps))
        check("timed windows", int_problem(self.windows))
        check("telemetry interval", telemetry_interval_problem(self.telemetry_interval_s))
        # The profiler's rules are judged where the device is asked for (config.problems' doc), not on a resolved one.
        refuse(problems(self.model, launch=self.launch, loader=self.loader, data=self.data))

    @property
    def data_label(self) -> str:
        return "synthetic" if self.data is None else self.data


@dataclass(frozen=True)
class TrainConfig:
    """End-to-end training with the original suite's defaults (90 epochs, global batch 384)."""

    model: ModelConfig
    optimizer: OptimizerConfig = field(default_factory=lambda: OptimizerConfig(label_smoothing=0.1))
    epochs: int = 90
    batch_size: int = 384  # global: split evenly over the GPUs
    warmup_epochs: float = 5.0
    decay_epochs: tuple[int, ...] = (30, 60, 80)  # learning rate x decay_factor at each
    decay_factor: float = 0.1
    data: str | None = None  # None: a fixed synthetic data set (see trainbench.data.synthetic)
    loader: Loader = "cpu"  # with data (PyTorch): where images are decoded and augmented
    synthetic_train_examples: int = 1281  # one thousandth of ImageNet's training set
    synthetic_eval_examples: int = 50
    steps_per_epoch: int | None = None  # None: one pass over the training set
    eval_steps: int | None = None  # None: one pass over the evaluation set
    output: str = "train_data"
    resume: bool = False
    log_every: int = 100
    launch: LaunchConfig = field(default_factory=LaunchConfig)  # PyTorch: processes sharing the global batch

    def __post_init__(self) -> None:
        check("epochs", int_problem(self.epochs))
        check("batch size", int_problem(self.batch_size, 1, MAX_BATCH_SIZE))
        check("progress interval", int_problem(self.log_every))
        check("synthetic training examples", int_problem(self.synthetic_train_examples))
        check("synthetic evaluation examples", int_problem(self.synthetic_eval_examples))
        if self.steps_per_epoch is not None:
            check("steps per epoch", int_problem(self.steps_per_epoch))
        if self.eval_steps is not None:
            check("evaluation steps", int_problem(self.eval_steps))
        check("warm-up epochs", float_problem(self.warmup_epochs, 0.0, MAX_COUNT))
        for epoch in self.decay_epochs:
            check("decay epoch", int_problem(epoch, 0))
        if list(self.decay_epochs) != sorted(set(self.decay_epochs)):
            raise UsageError(f"decay epochs must be increasing, got {self.decay_epochs}")
        if self.model.cuda_graph:
            raise UsageError("--cuda-graph is for throughput and profile runs: training sets a new learning rate "
                             "every step, which a captured graph would not see; use --compile reduce-overhead")
        refuse(problems(self.model, launch=self.launch, loader=self.loader, data=self.data))
        if self.model.shard == "fsdp":
            raise UsageError("train --shard fsdp: training saves whole-model checkpoints from rank 0, which sharded "
                             "parameters do not hold; measure FSDP with throughput, profile or variability")
        if self.data is not None and (problem := train_data_problem(self.model)):
            raise UsageError(problem)


# --- to and from JSON ------------------------------------------------------------------------------------------


def to_dict(config: Any) -> dict[str, Any]:
    return dataclasses.asdict(config)


class ConfigError(UsageError):
    """A configuration file that is not one the suite wrote: not a JSON object, a field missing or unknown, a list
    where a value goes. A bad value in a well-formed file is the UsageError its dataclass raises."""


def _object(raw: Any, what: str) -> dict[str, Any]:
    """A JSON object's fields; anything else is a ConfigError saying what came instead."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{what} must be a JSON object, got {type(raw).__name__}")
    return raw


def _built(config_class: type, fields: dict[str, Any], what: str) -> Any:
    """``config_class(**fields)``; a field missing or unknown (the dataclass's TypeError) is a ConfigError."""
    try:
        return config_class(**fields)
    except TypeError as error:
        raise ConfigError(f"{what}: {error}") from None


def _nested(config_class: type, fields: dict[str, Any], name: str, *, required: bool = False) -> dict[str, Any]:
    """``{name: config_class(...)}`` built from the nested object; nothing when an optional one is absent or null,
    so the field's default holds."""
    if fields.get(name) is None and not required:
        return {}
    return {name: _built(config_class, _object(fields.get(name), name), name)}


def _tuple(fields: dict[str, Any], name: str) -> dict[str, Any]:
    """JSON has no tuples: ``{name: tuple(list)}`` when the list is there, else nothing (the field's default)."""
    if name not in fields:
        return {}
    if not isinstance(fields[name], list | tuple):  # a tuple: to_dict's output not yet through JSON
        raise ConfigError(f"{name} must be a JSON list, got {type(fields[name]).__name__}")
    return {name: tuple(fields[name])}


def _fields(raw: Any) -> dict[str, Any]:
    """A configuration file's top-level fields, without the ``"format"`` version write_json_atomic stamps in."""
    return unstamped(_object(raw, "a configuration"))


def _renamed(fields: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """Files written before a field was renamed: ``old``'s value under ``new`` (both given: the file is not ours)."""
    if old not in fields:
        return fields
    if new in fields:
        raise ConfigError(f"both {old!r} and {new!r} given: {old!r} is {new!r}'s older name")
    return {new if name == old else name: value for name, value in fields.items()}


# The loaders: to_dict's output as read back from JSON. Every problem is a UsageError: a malformed object (not an
# object, a field missing or unknown) is a ConfigError naming what is wrong; a bad value, the UsageError its
# dataclass raises.


def bench_config_from_dict(raw: Any) -> BenchConfig:
    """A throughput or profile worker's configuration (logs/batch_<X>.config.json; "repeats" before "windows")."""
    fields = _renamed(_fields(raw), "repeats", "windows")
    nested = {**_nested(ModelConfig, fields, "model", required=True), **_nested(OptimizerConfig, fields, "optimizer"),
              **_nested(ProfileConfig, fields, "profile"), **_nested(LaunchConfig, fields, "launch")}
    return _built(BenchConfig, {**fields, **nested}, "a throughput configuration")


def train_config_from_dict(raw: Any) -> TrainConfig:
    """A training run's configuration (its config.json)."""
    fields = _fields(raw)
    nested = {**_nested(ModelConfig, fields, "model", required=True), **_nested(OptimizerConfig, fields, "optimizer"),
              **_tuple(fields, "decay_epochs"), **_nested(LaunchConfig, fields, "launch")}
    return _built(TrainConfig, {**fields, **nested}, "a training configuration")
