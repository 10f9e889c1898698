"""Dense peak FLOP/s per GPU model and precision: MFU's denominator (model FLOPs utilisation, PaLM 2022).

MFU = achieved model FLOP/s (samples/s x the training FLOPs of one sample) / the dense peak of the GPUs that ran
at the run's precision. Peaks are the vendors' datasheet figures for dense math (the sparse ones are twice these
and never used), recorded with their source; a GPU is matched on the name NVML reports (env.json, telemetry).
An unknown GPU, a precision the table has no figure for, or the CPU: no peak, and the reason instead.

fp32 runs are judged against the peak of the arithmetic they ran in (``arithmetic``): both engines set fp32's
products explicitly (``ModelConfig.matmul_precision``): "highest" keeps them fp32, judged against the CUDA cores'
fp32 peak; "high" lets them use TF32, judged against the TF32 Tensor Core peak where the GPU has one (Ampere and
later; before, TF32 does not exist and the fp32 peak stands).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TERA = 1e12
# A run's arithmetic -> the table's precisions its peak is read from, first found first: TF32 where the GPU has it.
MATH: dict[str, tuple[str, ...]] = {"fp32": ("fp32",), "tf32": ("tf32", "fp32"), "fp16": ("fp16",), "bf16": ("bf16",)}


def arithmetic(precision: str, matmul_precision: str) -> str:
    """The arithmetic a run's products use: fp32 with ``matmul_precision`` "high" is TF32 (where the GPU has it)."""
    return "tf32" if precision == "fp32" and matmul_precision == "high" else precision


@dataclass(frozen=True)
class GpuPeaks:
    """One GPU model's dense peaks, TFLOP/s by math precision (fp32: the CUDA cores'; tf32, fp16, bf16: the Tensor
    Cores'), and where they come from."""

    model: str  # "H100 SXM"
    pattern: str  # a regular expression on the lower-cased NVML name
    tflops: Mapping[str, float]
    source: str


_H100 = "NVIDIA H100 Tensor Core GPU datasheet (SXM5 column, dense)"
_H100_PCIE = "NVIDIA H100 Tensor Core GPU datasheet (PCIe column, dense)"
_A100 = "NVIDIA A100 Tensor Core GPU datasheet (dense; SXM4 and PCIe alike)"

# Ordered: the first pattern that matches names the GPU (the specific variants before the general one). NVL parts
# have peaks of their own, not in this table yet: they match nothing and their MFU is left empty with the reason.
PEAKS: tuple[GpuPeaks, ...] = (
    GpuPeaks("H100 PCIe", r"h100.*pcie", {"bf16": 756.0, "fp16": 756.0, "tf32": 378.0, "fp32": 51.0},
             _H100_PCIE),
    GpuPeaks("H100 SXM", r"h100(?!.*nvl)", {"bf16": 989.0, "fp16": 989.0, "tf32": 495.0, "fp32": 67.0}, _H100),
    GpuPeaks("H200 SXM", r"h200(?!.*nvl)", {"bf16": 989.0, "fp16": 989.0, "tf32": 495.0, "fp32": 67.0},
             "NVIDIA H200 Tensor Core GPU datasheet (SXM, dense; the H100 SXM's compute)"),
    GpuPeaks("A100", r"a100", {"bf16": 312.0, "fp16": 312.0, "tf32": 156.0, "fp32": 19.5}, _A100),
    GpuPeaks("V100 SXM2", r"v100.*sxm", {"fp16": 125.0, "fp32": 15.7},
             "NVIDIA Tesla V100 datasheet (SXM2; no bf16, no TF32: fp32 is the CUDA cores')"),
    # "Tesla V100S-PCIE-32GB" is a part of its own (higher clocks): matched before, and never as, the V100 PCIe.
    GpuPeaks("V100S PCIe", r"v100s.*pcie", {"fp16": 130.0, "fp32": 16.4},
             "NVIDIA V100S datasheet (PCIe; no bf16, no TF32: fp32 is the CUDA cores')"),
    GpuPeaks("V100 PCIe", r"v100(?!s).*pcie", {"fp16": 112.0, "fp32": 14.0},
             "NVIDIA Tesla V100 datasheet (PCIe; no bf16, no TF32: fp32 is the CUDA cores')"),
    GpuPeaks("L4", r"\bl4\b", {"bf16": 121.0, "fp16": 121.0, "tf32": 60.0, "fp32": 30.3},
             "NVIDIA L4 datasheet (dense)"),
    GpuPeaks("L40S", r"l40s", {"bf16": 362.0, "fp16": 362.0, "tf32": 183.0, "fp32": 91.6},
             "NVIDIA L40S datasheet (dense)"),
    # The GB200's GPU ("NVIDIA GB200") runs faster than the HGX B200's: matched before, and never as, the B200.
    GpuPeaks("GB200", r"gb200", {"bf16": 2500.0, "fp16": 2500.0},
             "NVIDIA GB200 NVL72 datasheet (per GPU, dense: half the 5 PFLOPS sparse bf16/fp16)"),
    GpuPeaks("B200", r"(?<!g)b200", {"bf16": 2250.0, "fp16": 2250.0},
             "NVIDIA HGX B200 datasheet (per GPU, dense: half the 4.5 PFLOPS sparse bf16/fp16)"),
)


@dataclass(frozen=True)
class Peak:
    """The peak FLOP/s of the GPUs a measurement ran on, or None with the reason."""

    flops: float | None
    note: str


def gpu_peaks(name: str) -> GpuPeaks | None:
    """The table's entry for an NVML GPU name ("NVIDIA H100 80GB HBM3"), or None."""
    lowered = name.lower()
    return next((entry for entry in PEAKS if re.search(entry.pattern, lowered)), None)


def peak_flops(gpu_names: Sequence[str | None], precision: str) -> Peak:
    """The summed dense peak of ``gpu_names`` (the GPUs one measurement drove, as NVML names them; none: the CPU)
    at ``precision``, or None and why."""
    if not gpu_names:
        return Peak(None, "no GPU: MFU is for GPUs with a known peak")
    total = 0.0
    for name in gpu_names:
        entry = gpu_peaks(name) if name else None
        if entry is None:
            return Peak(None, f"no peak FLOP/s known for GPU {name!r} (results/peaks.py)")
        tflops = next((entry.tflops[math] for math in MATH.get(precision, ()) if math in entry.tflops), None)
        if tflops is None:
            return Peak(None, f"no {precision} peak for the {entry.model} in results/peaks.py")
        total += tflops * TERA
    first = gpu_peaks(str(gpu_names[0]))
    assert first is not None
    math = next(math for math in MATH[precision] if math in first.tflops)
    return Peak(total, f"{len(gpu_names)} x {first.model} dense {math} peak ({first.source})")
