"""Campaign matrices: a YAML file whose axes' cartesian product is the plan of a benchmark campaign.

The format (plain YAML; every key but ``axes`` is optional)::

    axes:                        # the product of every axis but batch_size is the campaign's experiments
      framework: [torch, tf]
      precision: [fp32]
      batch_size: [1, 2]         # required: swept inside each experiment, one worker per batch size
      image_size: [64]
    repeats: 2                   # runs of each experiment, interleaved: every experiment's run 0, then run 1...
    warmup: 1                    # run settings: one value each, the same for every experiment
    steps: 2
    exclude:                     # an experiment that matches every key of one rule is dropped
      - {framework: tf, precision: [fp16, bf16]}

Axes (a scalar counts as a one-value list; a value given twice is refused):
workload (``trainbench workloads``' names, default resnet50), size (full, tiny), seq_len (sequence workloads),
framework, precision, device (``trainbench throughput``'s names; "auto" is kept, resolved by the runner),
batch_size, image_size, num_classes (absent: the data's classes, else the workload's, as ``--num-classes``), seed,
data ("synthetic" or a data folder, relative to the current folder, stored resolved), xla, channels_last,
cuda_graph (true/false), compile (true/false, or one of torch.compile's modes: ``reduce-overhead``...),
matmul_precision (highest, high: the fp32 products' precision, ``ModelConfig``'s; absent: highest), optimizer (sgd,
adam, adamw: ``OptimizerConfig.reference(workload, name)``; absent: each workload's reference optimizer),
activation_checkpointing (none, full: PyTorch recomputes each transformer block's forward in the backward pass;
absent: none), shard (ddp, fsdp: how several PyTorch processes hold the model, replicas or FSDP2 shards; fsdp needs
gpus above 1; absent: ddp), loader (cpu, gpu: where real images are decoded), profiler ("none" or one of ``trainbench
profile``'s profilers), gpus (whole number >= 1: PyTorch processes under torchrun, the batch size per process),
nodes (1 here; several nodes: scripts/slurm/).

Settings: repeats (campaign repetitions), warmup, steps, windows (timed windows per batch size: throughput's
``--windows``), timeout (seconds per batch size, or null), sync_every_step, and for the profilers start_iteration,
iterations and clock_control ("base" or "none"). Defaults are the suite's own (config.field_default).

Built-in legality filter, applied after ``exclude`` (combinations the suite would refuse, dropped rather than
reported so that axes can be crossed freely): what ``config.problems`` refuses, the rules ``trainbench throughput``
and ``profile`` apply (xla=true only with framework tf; compile, cuda_graph and channels_last only with framework
torch; compile and cuda_graph not together; precision fp16 not with device cpu; CUDA graphs or the GPU loader not
on device cpu; cuda_graph not with fp16; loader gpu only with data; profiler torch or tf only with that framework;
profiler ncu, nsys or nvprof not with device cpu; gpus above 1 not with framework tf; activation_checkpointing full
and shard fsdp only with framework torch; shard fsdp only with gpus above 1 (a campaign launches one process without
torchrun) and not with precision fp16), and nodes above 1 (a multi-node sweep is a Slurm job, not a campaign), and
the workload's own refusals (a framework it lacks: gpt2 on tf; a shape setting it does not have: seq_len on resnet50,
image_size on bert; --data or channels_last where it has none; activation_checkpointing full on resnet50 or
retinanet). A matrix that leaves no experiment is refused.

The package: ``values`` (the axes, the settings and their parsers), ``read`` (the YAML file), ``overrides``,
``legality`` (the filter), ``plan`` (experiments, config strings, the order of runs) and ``configs`` (each
experiment's BenchConfigs).

Overrides (``parse_overrides``), Hydra style: ``key=v1,v2`` replaces an axis's values (an axis the file lacks is
added), ``key=v`` sets a setting; each value is read as YAML (``true``, ``64``, ``fp32``), so a value cannot contain
a comma.

Every problem (an unknown key, a bad value, an empty list or product, a YAML syntax error) is a one-line
UsageError naming the file and the key, or the override; every experiment's BenchConfig is built at load time so
that config.py's checks speak before anything runs.

Config strings (run folders' names): framework, precision and the workload's shape settings as run always
(``torch-fp32-img64``, ``bert-torch-fp32-seq128``: image size, sequence length), then, in a fixed axis order (the
workload first), every other axis that has more than one value or whose one value is not the default (``xla``,
``no_xla``, ``gpus2``, ``data_<folder name>_<8 hex digits of the path's sha256>``...). Tokens never contain "-",
"/" or white space, so two experiments of one matrix never share a string, and reordering keys changes nothing.
The step's axes are named in their tokens: ``matmul_high``, ``opt_adamw``, ``recompute_full``, ``shard_fsdp``.

The fingerprint is the sha256 of a canonical JSON (sorted keys) of the axes, repeats, settings and exclude rules:
a resumed campaign can refuse a different matrix; the order of mapping keys does not change it. Its ``format``
(``FINGERPRINT_FORMAT``) changes when the same matrix would measure another step: format 2 sets the matmul precision
explicitly, so a campaign begun before is refused as another matrix rather than mixed with runs of the new step. New
axes whose absence is the step run before (activation_checkpointing none, shard ddp) leave it as it is.
"""

from trainbench.campaign.matrix.configs import bench_configs
from trainbench.campaign.matrix.legality import excluded, illegal
from trainbench.campaign.matrix.overrides import Override, parse_override, parse_overrides
from trainbench.campaign.matrix.plan import Experiment, Matrix, config_string, experiments, format_plan, planned_runs
from trainbench.campaign.matrix.read import load_matrix
from trainbench.campaign.matrix.values import (
    AXES,
    AXIS_DEFAULTS,
    CLOCK_CONTROLS,
    FINGERPRINT_FORMAT,
    NO_PROFILER,
    SETTINGS,
    SYNTHETIC,
    TOP_LEVEL,
    Settings,
)
from trainbench.results.layout import UNFINISHED_MARKERS

__all__ = [
    "AXES",
    "AXIS_DEFAULTS",
    "CLOCK_CONTROLS",
    "FINGERPRINT_FORMAT",
    "NO_PROFILER",
    "SETTINGS",
    "SYNTHETIC",
    "TOP_LEVEL",
    "UNFINISHED_MARKERS",
    "Experiment",
    "Matrix",
    "Override",
    "Settings",
    "bench_configs",
    "config_string",
    "excluded",
    "experiments",
    "format_plan",
    "illegal",
    "load_matrix",
    "parse_override",
    "parse_overrides",
    "planned_runs",
]
