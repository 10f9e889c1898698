"""The names GPU telemetry is written under: the timeline CSV's columns and the fields a batch size's result gains.

One place, read by the sampler that writes them, the worker that summarises them, the plot and the variability
analysis that read them back.

``telemetry/batch_<X>.csv`` (one per batch size, in the run folder) is a tidy table, one row per event:

- ``sample``: one GPU's state at ``time_s`` (``gpu`` is its NVML index); the sampler's period is
  ``--telemetry-interval`` (default 0.1 s).
- ``step_end``: a training step (``step``, the global iteration, warm-up included) returned at ``time_s``.
- ``window_start`` / ``window_end``: the synchronised edges of timed window ``window`` (0, 1, ... with --windows).

``time_s`` is CLOCK_MONOTONIC in seconds (``time.monotonic``): one clock for every process on a host, so the
workers of one sweep share a time axis. ``phase`` is what the worker was doing: ``setup`` (model built, before the
first step), ``warmup``, ``timed``, ``done``. ``clock_event_reasons`` is NVML's bit mask (``REASON_BITS``).
"""

from __future__ import annotations

from trainbench.results import fields
from trainbench.results.fields import Group, Where

TELEMETRY_DIR = "telemetry"  # in a run folder: batch_<X>.csv per batch size

EVENT_SAMPLE = "sample"
EVENT_STEP_END = "step_end"
EVENT_WINDOW_START = "window_start"
EVENT_WINDOW_END = "window_end"

PHASE_SETUP = "setup"
PHASE_WARMUP = "warmup"
PHASE_TIMED = "timed"
PHASE_DONE = "done"

SAMPLE_FIELDS: tuple[str, ...] = (
    "sm_clock_mhz",
    "memory_clock_mhz",
    "power_w",
    "temperature_c",
    "gpu_util_pct",
    "memory_util_pct",
    "clock_event_reasons",
)
TELEMETRY_FIELDS: tuple[str, ...] = ("time_s", "event", "phase", "window", "step", "gpu", *SAMPLE_FIELDS)

# NVML's clock-event (throttle) reasons, bit by bit (nvmlClocksEventReason*): the names the results use.
REASON_BITS: dict[str, int] = {
    "gpu_idle": 0x1,
    "applications_clocks_setting": 0x2,
    "sw_power_cap": 0x4,
    "hw_slowdown": 0x8,
    "sync_boost": 0x10,
    "sw_thermal_slowdown": 0x20,
    "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80,
    "display_clock_setting": 0x100,
}
# The two fractions in the flat results, and the reasons each covers (counter or sample bits).
POWER_REASONS = ("sw_power_cap", "hw_power_brake_slowdown")
THERMAL_REASONS = ("sw_thermal_slowdown", "hw_thermal_slowdown")

# What a batch size's result gains (summary.json/summary.csv, the campaign table), as the result fields' registry
# declares it (``results.fields``: the energy and telemetry groups): sums over the GPUs the worker used, over all its
# timed windows; None with ``telemetry_note`` saying why when a value could not be measured.
TELEMETRY_GROUPS = (Group.ENERGY, Group.TELEMETRY)


def telemetry_values() -> tuple[str, ...]:
    """The flat telemetry fields, in column order, as the registry declares them now."""
    return tuple(f.name for f in fields.in_groups(*TELEMETRY_GROUPS) if f.written_to(Where.SUMMARY_CSV))


TELEMETRY_VALUES: tuple[str, ...] = telemetry_values()  # when this module was imported
GPU_TELEMETRY = fields.BY_NAME["gpu_telemetry"].name  # summary.json only: one object per GPU

# A variability folder (trainbench.bench.variability writes it, trainbench.analysis.variability reads it): the plan,
# and one throughput run folder per (GPU, repetition).
VARIABILITY_FILE = "variability.json"
DEFAULT_OUTLIER_THRESHOLD = 0.10  # slower than the median GPU by more than this fraction: an outlier


def variability_run_name(gpu_index: int, repetition: int) -> str:
    """``gpu<index>_rep<r>``: the run folder of one GPU's (NVML index) repetition."""
    return f"gpu{gpu_index}_rep{repetition}"
