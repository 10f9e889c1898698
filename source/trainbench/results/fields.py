"""The result fields: every value a batch size's result holds, declared once.

Each ``Field`` says what the value means and in which unit, which files it is written to, how the ranks of a
multi-process run combine it, and the group it belongs to. Every list of fields elsewhere is derived from
``FIELDS``: summary.json/.csv's columns (``bench.throughput_run``), a campaign's results.csv (``campaign.table``),
the report's tables (``report.sections``, ``render.console``), the rank merge (``bench.ranks``), the telemetry values
(``telemetry.schema``), what a performance model may fit (``analysis.measurements``) and which values a reader
checks as measurements (``results.records``). A value no entry declares is an error where a result is stored.

Adding a field: one entry at the END of ``FIELDS`` (columns keep their places: the order is append-only), and the
code that produces the value. Rates count samples, not images: one sample is what one step's batch holds one of (an
image for ResNet-50). Files written before format 3 used image names; ``RENAMED`` maps them and
``results.records`` reads them under the new names.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from trainbench.results import layout


class Where(StrEnum):
    """A file a field is written to (the file's name, as a tag: the run folder's layout owns the paths)."""

    SUMMARY_JSON = layout.SUMMARY  # a throughput run's summary: every field, lists and objects included
    SUMMARY_CSV = layout.SUMMARY_CSV  # the same, flat: one column per field, one row per batch size
    RESULTS_CSV = layout.RESULTS  # a campaign's table: a fixed column (a profile's own values go after them)
    PROFILE_JSON = layout.PROFILE  # a profiled run's record


class Merge(StrEnum):
    """How the ranks of one batch size (processes that measured together) combine a value (``bench.ranks``)."""

    LEAD = "lead"  # the lowest rank's value stands for all (step times: rank 0's steps.csv)
    SUM = "sum"  # summed over the ranks; None when a rank has none (energy of the node's GPUs)
    MAX = "max"  # the worst rank's (the slowest window, the hottest GPU); ranks without one are skipped
    MIN = "min"  # the lowest over the ranks that have one
    MEDIAN = "median"  # the median rank's
    JOIN = "join"  # distinct texts joined with "; " (notes)
    CONCAT = "concat"  # lists concatenated in rank order (one entry per GPU)
    WORLD = "world"  # computed from every rank together (world rates, world size): see ``bench.ranks``


class Group(StrEnum):
    """What a field is about: the report and the console table lay fields out by group."""

    THROUGHPUT = "throughput"  # the rate over all timed windows
    SPREAD = "spread"  # the timed windows one by one, and their spread
    INPUT = "input"  # the input pipeline alone (--data runs)
    TIMING = "timing"  # step times and step counts
    LAUNCH = "launch"  # the processes that measured
    ENERGY = "energy"  # NVML's energy counter over the timed windows
    TELEMETRY = "telemetry"  # sampled power, clocks, temperature, throttling, and the notes on them
    STATE = "state"  # the GPUs as they were at a moment
    PROFILE = "profile"  # a profiled window's record
    WORK = "work"  # what one sample costs (parameters, FLOPs), tokens/s, and the FLOP/s and MFU they give
    LOAD = "load"  # other work on the machine during the timed windows (bench.machine_load)
    STEP = "step"  # how the training step ran: its arithmetic, optimizer, attention kernel and image layout
    MEMORY = "memory"  # what the step holds in memory: the peak over the timed windows and its breakdown


JSON, CSV, TABLE, PROFILE = Where.SUMMARY_JSON, Where.SUMMARY_CSV, Where.RESULTS_CSV, Where.PROFILE_JSON
FLAT = (JSON, CSV, TABLE)  # a number or flag everywhere a batch size's result is written
RUN = (JSON, CSV)  # in the run's summaries, not in a campaign's table (which has its own window column)
NESTED = (JSON,)  # a list or object: summary.json only


@dataclass(frozen=True)
class Field:
    """One result field. ``unit`` is "" for a count, a flag or a text; ``console`` is its header in the table a
    sweep prints ("" when the table leaves it out); ``measured``: a rate, time or energy, which a reader checks is a
    finite non-negative number (or a list of them) on an ok result; ``modelled``: a performance model may fit it."""

    name: str
    unit: str
    where: tuple[Where, ...]
    merge: Merge
    group: Group
    doc: str
    measured: bool = False
    console: str = ""
    modelled: bool = False

    def written_to(self, where: Where) -> bool:
        return where in self.where


def _rate(name: str, where: tuple[Where, ...], group: Group, doc: str, console: str = "") -> Field:
    return Field(name, "samples/s", where, Merge.WORLD, group, doc, measured=True, console=console)


def _bytes(name: str, merge: Merge, doc: str, console: str = "") -> Field:
    return Field(name, "B", FLAT, merge, Group.MEMORY, doc, measured=True, console=console)


def _seconds(name: str, merge: Merge, doc: str, console: str = "", where: tuple[Where, ...] = FLAT) -> Field:
    return Field(name, "s", where, merge, Group.TIMING, doc, measured=True, console=console)


# The append-only order of summary.csv's columns (and of results.csv's, for the fields it holds).
FIELDS: tuple[Field, ...] = (
    Field("samples_per_sec", "samples/s", FLAT, Merge.WORLD, Group.THROUGHPUT,
          "all timed samples / all timed wall time (every rank's samples over the slowest rank's windows)",
          measured=True, console="samples/s", modelled=True),
    Field("windows", "", RUN, Merge.LEAD, Group.SPREAD, "timed windows (--windows)", console="windows"),
    _rate("samples_per_sec_median", RUN, Group.SPREAD, "median of the windows' own samples/s"),
    _rate("samples_per_sec_min", RUN, Group.SPREAD, "the slowest window's samples/s", console="min samples/s"),
    _rate("samples_per_sec_max", RUN, Group.SPREAD, "the fastest window's samples/s", console="max samples/s"),
    Field("window_samples_per_sec", "samples/s", (JSON, TABLE), Merge.WORLD, Group.SPREAD,
          "each timed window's own samples/s (results.csv: one row per window)", measured=True),
    Field("input_samples_per_sec", "samples/s", FLAT, Merge.LEAD, Group.INPUT,
          "--data runs: the input pipeline alone, same batch size, no model (bench.input_bench)", measured=True,
          console="input samples/s"),
    Field("input_bound", "", FLAT, Merge.LEAD, Group.INPUT,
          "--data runs: input_samples_per_sec < 1.1 x samples_per_sec", console="input-bound"),
    _seconds("step_time_median_s", Merge.LEAD, "median over every timed step (rank 0's)", console="step median ms"),
    _seconds("step_time_p10_s", Merge.LEAD, "10th percentile of the timed steps", console="p10 ms"),
    _seconds("step_time_p90_s", Merge.LEAD, "90th percentile of the timed steps", console="p90 ms"),
    _seconds("step_time_mad_s", Merge.LEAD, "median absolute deviation of the timed steps", console="MAD ms"),
    _seconds("window_s", Merge.MAX, "timed wall time, all windows together (the slowest rank's)", where=RUN),
    Field("timed_steps", "", FLAT, Merge.LEAD, Group.TIMING, "timed steps, all windows together", console="steps"),
    Field("warmup_steps", "", FLAT, Merge.LEAD, Group.TIMING, "untimed steps before the first window"),
    Field("world_size", "", RUN, Merge.WORLD, Group.LAUNCH,
          "processes that measured together (--gpus x --nodes); None: one"),
    _seconds("compile_s", Merge.LEAD, "torch --compile / --cuda-graph: compiling or capturing the step, before and "
             "outside every window; it also holds the input pipeline's start-up (--data) and the 3 steps run to "
             "prepare (cuDNN's autotuning, the graphs' upload)"),
    # GPU telemetry (trainbench.telemetry): sums over the GPUs the worker used, over all its timed windows; None with
    # telemetry_note saying why when a value could not be measured.
    Field("energy_j", "J", FLAT, Merge.SUM, Group.ENERGY,
          "NVML's total-energy counter read at both synchronised edges of every timed window", measured=True),
    Field("joules_per_sample", "J", FLAT, Merge.WORLD, Group.ENERGY, "energy_j / the samples of the node's ranks",
          measured=True, modelled=True),
    Field("samples_per_joule", "samples/J", FLAT, Merge.WORLD, Group.ENERGY, "the inverse of joules_per_sample",
          measured=True),
    Field("mean_power_w", "W", FLAT, Merge.SUM, Group.ENERGY, "energy_j / timed seconds", measured=True,
          modelled=True),
    Field("sampled_power_w", "W", FLAT, Merge.SUM, Group.TELEMETRY,
          "mean of the sampler's power readings in the timed windows (a cross-check of mean_power_w)", measured=True),
    Field("sm_clock_median_mhz", "MHz", FLAT, Merge.MEDIAN, Group.TELEMETRY,
          "median of the sampler's SM clock readings in the timed windows", measured=True),
    Field("temperature_max_c", "°C", FLAT, Merge.MAX, Group.TELEMETRY, "the hottest GPU's highest reading"),
    Field("throttle_power_fraction", "", FLAT, Merge.MAX, Group.TELEMETRY,
          "share of the timed time limited by power (the worst GPU)"),
    Field("throttle_thermal_fraction", "", FLAT, Merge.MAX, Group.TELEMETRY, "the same, by temperature"),
    Field("telemetry_samples", "", FLAT, Merge.SUM, Group.TELEMETRY, "sampler rows in the timed windows (all GPUs)"),
    Field("telemetry_note", "", FLAT, Merge.JOIN, Group.TELEMETRY,
          "why a telemetry value is None (\"no GPU telemetry: ...\", \"window shorter than ...\")"),
    # Lists and objects: summary.json only.
    Field("gpus_at_window_end", "", NESTED, Merge.LEAD, Group.STATE, "NVML's state of each GPU after the last window"),
    Field("gpu_telemetry", "", NESTED, Merge.CONCAT, Group.TELEMETRY,
          "one object per GPU: index, uuid, name and the telemetry values"),
    Field("ranks", "", NESTED, Merge.WORLD, Group.LAUNCH, "multi-process runs: each rank's own figures"),
    # A profiled window's record (profile.json; results.csv shows a profile's values after the fixed columns).
    Field("profiled_iterations", "", (PROFILE,), Merge.LEAD, Group.PROFILE, "the iterations the profiler held"),
    Field("profiled_samples_per_sec", "samples/s", (PROFILE,), Merge.LEAD, Group.PROFILE,
          "samples/s with the profiler attached: never a throughput to compare", measured=True),
    # What the workload's samples cost and how much of the GPUs' peak that is (format 4). Counted by the engine from
    # the built model once per batch size, outside every window; the rates are the world's, as samples_per_sec.
    Field("tokens_per_sec", "tokens/s", FLAT, Merge.WORLD, Group.WORK,
          "sequence workloads: samples_per_sec x tokens per sample (the runner's tokens_per_step / samples_per_step)",
          measured=True, console="tokens/s", modelled=True),
    Field("parameters", "", FLAT, Merge.LEAD, Group.WORK, "trainable parameters of the network as built"),
    Field("train_flops_per_sample", "FLOP", FLAT, Merge.LEAD, Group.WORK,
          "floating-point operations of one training step's forward and backward passes per sample (the optimizer "
          "update, a few per parameter, is not counted)", measured=True),
    Field("flops_note", "", RUN, Merge.JOIN, Group.WORK, "how train_flops_per_sample was counted, or why not"),
    Field("achieved_flops", "FLOP/s", FLAT, Merge.WORLD, Group.WORK, "samples_per_sec x train_flops_per_sample",
          measured=True, console="TFLOP/s", modelled=True),
    Field("peak_flops", "FLOP/s", RUN, Merge.WORLD, Group.WORK,
          "the dense peak of every GPU that measured, at the run's precision (results.peaks)", measured=True),
    Field("mfu", "fraction", FLAT, Merge.WORLD, Group.WORK,
          "model FLOPs utilisation: achieved_flops / peak_flops; None on the CPU or an unknown GPU (see mfu_note)",
          measured=True, console="MFU %", modelled=True),
    Field("mfu_note", "", FLAT, Merge.JOIN, Group.WORK, "the peak MFU is measured against, or why there is no MFU"),
    # How far a result can be trusted (results.trust flags it): the windows' agreement, and other work on the machine
    # across the windows (bench.machine_load; None where /proc/stat cannot be read, or in files written before).
    Field("window_cv_pct", "%", RUN, Merge.WORLD, Group.SPREAD,
          "coefficient of variation of the windows' own samples/s: sample standard deviation (ddof 1) / mean x 100; "
          "None with one window", measured=True, console="CV %"),
    Field("window_spread_pct", "%", RUN, Merge.WORLD, Group.SPREAD,
          "(fastest - slowest window's samples/s) / their median x 100; None with one window", measured=True,
          console="spread %"),
    Field("other_cpu_cores", "cores", FLAT, Merge.MAX, Group.LOAD,
          "the mean number of cores that processes other than the measuring one kept busy during a window (the "
          "busiest window's; the run's own DataLoader workers and other ranks count as other): /proc/stat's busy "
          "time less the process's own CPU time, over the window's wall time", measured=True),
    Field("load_average", "", FLAT, Merge.MAX, Group.LOAD,
          "the machine's 1-minute load average read at a window's end (the highest)"),
    # How the step ran (format 5): what a comparison across frameworks or GPUs must hold equal, as the engine set it.
    Field("matmul_precision", "", FLAT, Merge.LEAD, Group.STEP,
          "fp32 matrix products and convolutions, set explicitly in both frameworks: highest (true fp32) or high "
          "(TF32 where the GPU has it); bf16/fp16 autocast runs its products in that precision either way",
          console="matmul"),
    Field("optimizer", "", FLAT, Merge.LEAD, Group.STEP,
          "the optimizer the step updates with, and its implementation: \"adamw (torch, fused)\"",
          console="optimizer"),
    Field("attention_kernel", "", FLAT, Merge.LEAD, Group.STEP,
          "the attention kernel the step ran (PyTorch's scaled_dot_product_attention backend: flash, "
          "memory-efficient, cudnn, math); None: no attention, or TensorFlow, which does not tell"),
    Field("image_layout", "", FLAT, Merge.LEAD, Group.STEP,
          "image workloads: the layout the network's convolutions ran in (NCHW, NHWC); None: no images"),
    # Memory (format 5): the peak is the framework allocator's on a GPU, the worker's resident set on the CPU
    # (peak_memory_kind says which); the breakdown is measured once per batch size, outside every window.
    _bytes("peak_memory_bytes", Merge.MAX, "the highest memory in use during the timed windows (the fullest rank's)",
           console="peak memory MiB"),
    Field("peak_memory_kind", "", FLAT, Merge.JOIN, Group.MEMORY,
          "what peak_memory_bytes measures: torch.cuda.max_memory_allocated, TensorFlow's get_memory_info peak, or "
          "the worker's peak resident set (VmHWM) on the CPU"),
    _bytes("memory_parameters_bytes", Merge.LEAD, "the trainable parameters' storage (fp32 master weights: 4 B each)"),
    _bytes("memory_gradients_bytes", Merge.LEAD, "the gradients one step leaves (one per trainable parameter)"),
    _bytes("memory_optimizer_bytes", Merge.LEAD,
           "every tensor the optimizer holds: its per-parameter state and its step counters"),
    _bytes("memory_activations_bytes", Merge.LEAD,
           "what the forward pass keeps for the backward pass (the saved tensors, parameters left out), measured on "
           "one step; None where the framework cannot tell (memory_note)"),
    _bytes("optimizer_state_bytes", Merge.LEAD,
           "the optimizer's per-parameter state alone: momentum (SGD: 4 B per fp32 parameter), Adam's two moments "
           "(8 B per parameter)"),
    Field("memory_note", "", FLAT, Merge.JOIN, Group.MEMORY, "why a memory value is None, or how it was measured"),
    Field("host_syncs_per_step", "", FLAT, Merge.LEAD, Group.STEP,
          "the times one training step's host waits to read a device value (PyTorch: counted by a dispatch mode on "
          "one eager step of the plain network; torchvision's RetinaNet loss: 9 per image); None: TensorFlow, "
          "which cannot tell"),
    # Sharding and recomputation (format 6): what the model FLOPs leave out, and what each process holds.
    Field("activation_checkpointing", "", FLAT, Merge.LEAD, Group.STEP,
          "PyTorch: none (every activation kept) or full (each block's forward run again in the backward pass)",
          console="recompute"),
    Field("shard", "", FLAT, Merge.LEAD, Group.STEP,
          "PyTorch under torchrun: ddp (a replica per process) or fsdp (FSDP2 shards per block); None: one process",
          console="shard"),
    Field("parameters_held", "", FLAT, Merge.MAX, Group.WORK,
          "trainable parameters one process holds: its shards under --shard fsdp (the fullest rank's; each rank's in "
          "ranks), all of them otherwise"),
    Field("hardware_flops_per_sample", "FLOP", FLAT, Merge.LEAD, Group.WORK,
          "train_flops_per_sample plus what recomputation adds (--activation-checkpointing full: the blocks' "
          "forward again), counted the same way", measured=True),
    Field("hfu", "fraction", FLAT, Merge.WORLD, Group.WORK,
          "hardware FLOPs utilisation: samples_per_sec x hardware_flops_per_sample / peak_flops (= mfu without "
          "recomputation); None where mfu is", measured=True, console="HFU %"),
)

BY_NAME: dict[str, Field] = {f.name: f for f in FIELDS}
assert len(BY_NAME) == len(FIELDS), "a field is declared twice"

# Before format 3 rates and energies counted images: the old name of each renamed field.
RENAMED: dict[str, str] = {
    "images_per_sec": "samples_per_sec",
    "images_per_sec_median": "samples_per_sec_median",
    "images_per_sec_min": "samples_per_sec_min",
    "images_per_sec_max": "samples_per_sec_max",
    "window_images_per_sec": "window_samples_per_sec",
    "input_images_per_sec": "input_samples_per_sec",
    "joules_per_image": "joules_per_sample",
    "images_per_joule": "samples_per_joule",
    "profiled_images_per_sec": "profiled_samples_per_sec",
}
assert set(RENAMED.values()) <= set(BY_NAME), "every renamed field is declared"

# A value beside the model's own, which recomputation or sharding makes differ (format 6): HFU counts the recomputed
# forward (MFU without it), the hardware FLOPs likewise, and a process under FSDP holds its shards of the
# parameters. Tables show one right after its counterpart, and only where some row's differs from it.
BESIDE: dict[str, str] = {"parameters_held": "parameters", "hardware_flops_per_sample": "train_flops_per_sample",
                          "hfu": "mfu"}
assert set(BESIDE) | set(BESIDE.values()) <= set(BY_NAME), "every value beside another is a field"

# The names code refers to: a typo is an import error, never a silent None.
SAMPLES_PER_SEC = BY_NAME["samples_per_sec"].name
WINDOW_SAMPLES_PER_SEC = BY_NAME["window_samples_per_sec"].name
TOKENS_PER_SEC = BY_NAME["tokens_per_sec"].name
MFU = BY_NAME["mfu"].name
PEAK_MEMORY_BYTES = BY_NAME["peak_memory_bytes"].name


def written_to(where: Where) -> tuple[str, ...]:
    """The names of the fields written to ``where``, in column order. Read at each call, like every list derived
    here, so that a field added to the registry (a test's) is everywhere at once."""
    return tuple(f.name for f in FIELDS if f.written_to(where))


def in_groups(*groups: Group) -> tuple[Field, ...]:
    return tuple(f for f in FIELDS if f.group in groups)


def unknown(names: Iterable[str]) -> list[str]:
    """The names among ``names`` that no field declares."""
    return [name for name in names if name not in BY_NAME]
