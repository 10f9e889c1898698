"""Facts gpu_check records before measuring: ``python probe.py environment`` (versions, tools, GPUs) and
``python probe.py nvml [--seconds S]`` (NVML under a bf16 matmul load: the energy counter's real update period,
which violation counters answer, power usage against the instant power field). Each prints one JSON line last.

Only the standard library at module level: torch and pynvml are imported where used, so a missing one is a line in
the JSON (environment) or one error line (nvml), never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import itertools
import json
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time
from typing import Any

# What the suite's PyTorch path can use on a lent machine (the README of gpu_check says which are required).
PACKAGES = ("torch", "torchvision", "transformers", "nvidia-ml-py", "numpy", "pandas", "matplotlib", "PyYAML",
            "scipy", "google-crc32c", "tensorflow")
TOOLS = ("nvidia-smi", "ncu", "nsys", "torchrun")
VIOLATION_POLICIES = (0, 1, 2, 3, 4, 5, 10, 11)  # NVML_PERF_POLICY_*: power, thermal, sync boost, ... (B3)


def version_of(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def tool_version(tool: str) -> dict[str, str | None]:
    path = shutil.which(tool)
    if not path:
        return {"path": None, "version": None}
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=20, check=False)
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        return {"path": path, "version": lines[-1].strip() if lines else None}
    except (OSError, subprocess.TimeoutExpired) as error:
        return {"path": path, "version": f"unreadable: {error}"}


def torch_facts() -> dict[str, Any]:
    try:
        import torch
    except ImportError as error:
        return {"error": f"torch missing: {error}"}
    facts: dict[str, Any] = {"cuda_available": torch.cuda.is_available(), "cuda": torch.version.cuda,
                             "cudnn": torch.backends.cudnn.version()}
    if facts["cuda_available"]:
        facts["devices"] = [torch.cuda.get_device_name(index) for index in range(torch.cuda.device_count())]
        facts["compute_capability"] = ".".join(map(str, torch.cuda.get_device_capability(0)))
    return facts


def nvml_facts() -> dict[str, Any]:
    try:
        import pynvml
    except ImportError:
        return {"error": "nvidia-ml-py (pynvml) missing"}
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return {"error": f"NVML: {error}"}
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        return {"driver": _text(pynvml.nvmlSystemGetDriverVersion()),
                "gpus": [_text(pynvml.nvmlDeviceGetName(handle)) for handle in handles]}
    finally:
        pynvml.nvmlShutdown()


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def environment() -> dict[str, Any]:
    return {"python": platform.python_version(), "executable": sys.executable, "platform": platform.platform(),
            "packages": {name: version_of(name) for name in PACKAGES},
            "tools": {name: tool_version(name) for name in TOOLS}, "torch": torch_facts(), "nvml": nvml_facts()}


def load(stop: threading.Event) -> None:
    """bf16 matmuls on the GPU until ``stop``: the counters are probed under load, as a training step loads them."""
    import torch

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    while not stop.is_set():
        a = (a @ a).clamp_(-1, 1)
        torch.cuda.synchronize()


def energy_period(handle: Any, seconds: float) -> dict[str, Any]:
    """Polls the total-energy counter every 5 ms: the median time between changes is its update period (B12)."""
    import pynvml

    changes, last, end = [], pynvml.nvmlDeviceGetTotalEnergyConsumption(handle), time.monotonic() + seconds
    while time.monotonic() < end:
        time.sleep(0.005)
        value = pynvml.nvmlDeviceGetTotalEnergyConsumption(handle)
        if value != last:
            changes.append(time.monotonic())
            last = value
    gaps = [b - a for a, b in itertools.pairwise(changes)]
    return {"energy_changes": len(changes), "energy_update_period_ms": statistics.median(gaps) * 1e3 if gaps else None}


def violations(handle: Any) -> dict[str, Any]:
    import pynvml

    answers: dict[str, Any] = {}
    for policy in VIOLATION_POLICIES:
        try:
            status = pynvml.nvmlDeviceGetViolationStatus(handle, policy)
            answers[str(policy)] = {"violation_time_ns": status.violationTime, "reference_time": status.referenceTime}
        except pynvml.NVMLError as error:
            answers[str(policy)] = f"error: {error}"
    return answers


def power_pair(handle: Any) -> dict[str, Any]:
    """nvmlDeviceGetPowerUsage (averaged) against the instant power field, where the binding has it (B11)."""
    import pynvml

    usage_w = pynvml.nvmlDeviceGetPowerUsage(handle) / 1e3
    field = getattr(pynvml, "NVML_FI_DEV_POWER_INSTANT", None)
    if field is None:
        return {"power_usage_w": usage_w, "power_instant_w": None, "power_note": "no NVML_FI_DEV_POWER_INSTANT"}
    try:
        value = pynvml.nvmlDeviceGetFieldValues(handle, [field])[0]
        instant_w = value.value.uiVal / 1e3 if value.nvmlReturn == 0 else None
    except pynvml.NVMLError as error:
        return {"power_usage_w": usage_w, "power_instant_w": None, "power_note": f"error: {error}"}
    return {"power_usage_w": usage_w, "power_instant_w": instant_w}


def nvml_probe(seconds: float) -> dict[str, Any]:
    import pynvml
    import torch

    if not torch.cuda.is_available():
        raise SystemExit("error: no CUDA GPU visible to torch")
    pynvml.nvmlInit()
    handle = pynvml.nvmlDeviceGetHandleByIndex(0)
    stop = threading.Event()
    worker = threading.Thread(target=load, args=(stop,), daemon=True)
    worker.start()
    try:
        time.sleep(1.0)  # the load reaches its power before the counters are read
        facts = {**energy_period(handle, seconds), **power_pair(handle)}
        facts["violations"] = violations(handle)
    finally:
        stop.set()
        worker.join(timeout=10)
        pynvml.nvmlShutdown()
    facts["violation_policies_answering"] = sum(isinstance(v, dict) for v in facts["violations"].values())
    return facts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("what", choices=["environment", "nvml"])
    parser.add_argument("--seconds", type=float, default=3.0, help="nvml: how long the energy counter is polled")
    args = parser.parse_args()
    facts = environment() if args.what == "environment" else nvml_probe(args.seconds)
    print(json.dumps(facts, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
