"""One batch size, measured in a process of its own.

A fresh process per configuration keeps GPU memory unfragmented and cuDNN's choices independent, and lets an
out-of-memory failure or a crash end only this batch size. The parent reads the JSON this writes; if the process
dies without writing it, the parent records the death from the exit status and the log.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path
from typing import Any

from trainbench.bench.input_bench import InputBench, is_input_bound, measure_input
from trainbench.bench.stats import summarize_windows
from trainbench.bench.store import write_json_atomic
from trainbench.bench.timing import run_window
from trainbench.config import BenchConfig, bench_config_from_dict
from trainbench.engines import load_engine
from trainbench.engines.base import Engine
from trainbench.telemetry.nvml import gpu_state


def one_line(error: BaseException) -> str:
    """The error as one line: its type and the first non-empty line of its message, cut at 300 characters."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = f"{type(error).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    return text[:300]


def input_rate(config: BenchConfig) -> float:
    """The input pipeline alone, with the training window's step counts, before the model exists (so its workers
    have the machine to themselves and are gone before training starts)."""
    model = config.model
    bench = InputBench(model.framework, str(config.data), config.batch_size, model.image_size,
                       max(1, config.warmup_steps), config.steps, seed=model.seed)
    rate = measure_input(bench)["images_per_sec"]
    print(f"batch {config.batch_size}: input pipeline alone {rate:.2f} images/s", flush=True)
    return rate


def profile(config: BenchConfig, engine: Engine) -> dict[str, Any]:
    from trainbench.profile.session import profile_run  # framework profilers load only when asked for

    return {"result": profile_run(config, engine.make_runner(config))}


def measure(config: BenchConfig, engine: Engine) -> dict[str, Any]:
    if config.profile is not None:
        return profile(config, engine)
    pipeline_rate = input_rate(config) if config.data is not None else None
    runner = engine.make_runner(config)
    windows_text = f" x {config.repeats} windows" if config.repeats > 1 else ""
    print(f"batch {config.batch_size}: {config.warmup_steps} warm-up + {config.steps} timed steps{windows_text}",
          flush=True)
    # One warm-up, then the windows back to back: each synchronised at both edges, each its own images/s sample.
    windows = [run_window(runner, config.warmup_steps if i == 0 else 0, config.steps,
                          sync_every_step=config.sync_every_step) for i in range(config.repeats)]
    images_per_step = getattr(runner, "images_per_step", config.batch_size)  # all replicas together
    result = {"batch_size": config.batch_size, "status": "ok", "error": None,
              **summarize_windows(images_per_step, windows), "gpus_at_window_end": gpu_state()}
    if pipeline_rate is not None:
        result["input_images_per_sec"] = pipeline_rate
        result["input_bound"] = is_input_bound(pipeline_rate, result["images_per_sec"])
    print(f"batch {config.batch_size}: {result['images_per_sec']:.2f} images/s", flush=True)
    return {"result": result, "warmup_s": windows[0].warmup_s,
            "step_s": [seconds for window in windows for seconds in window.step_s]}


def run(config: BenchConfig) -> dict[str, Any]:
    engine = load_engine(config.model.framework)
    try:
        payload = measure(config, engine)
    except Exception as error:  # noqa: BLE001 - every failure becomes a recorded result, the sweep goes on
        traceback.print_exc()
        status = "oom" if engine.is_out_of_memory(error) else "error"
        payload = {"result": {"batch_size": config.batch_size, "status": status, "error": one_line(error)}}
    payload["versions"] = engine.versions()
    return payload


def main(argv: list[str]) -> int:
    config_path, result_path = (Path(arg) for arg in argv)
    config = bench_config_from_dict(json.loads(config_path.read_text()))
    payload = run(config)
    write_json_atomic(result_path, payload)
    return 0 if payload["result"]["status"] == "ok" else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
