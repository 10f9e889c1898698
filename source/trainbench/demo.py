"""``make demo``: the main job on an embedded default, on any machine, in a few minutes.

A short ResNet-50 throughput sweep on the CPU for both frameworks (synthetic data), each sweep a normal
``trainbench throughput`` run with its own folder, then one table and one comparison plot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from trainbench.bench.store import create_run_dir
from trainbench.bench.sweep import measure_throughput
from trainbench.config import BenchConfig, ModelConfig
from trainbench.report.plot import plot_throughput
from trainbench.report.table import format_table

# Small enough for 2 cores in a few minutes, large enough that the batch sizes differ measurably.
BATCH_SIZES = (1, 2, 4)
WARMUP_STEPS = 2
TIMED_STEPS = 6
FRAMEWORKS = ("torch", "tf")


def demo_configs(framework: str) -> list[BenchConfig]:
    model = ModelConfig(framework=framework, device="cpu", precision="fp32", image_size=224)
    return [BenchConfig(model=model, batch_size=size, warmup_steps=WARMUP_STEPS, steps=TIMED_STEPS)
            for size in BATCH_SIZES]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainbench.demo", description=__doc__)
    parser.add_argument("--output", default="demo_output", help="folder for the runs and the comparison")
    args = parser.parse_args(argv)
    output = Path(args.output)
    series = {}
    for framework in FRAMEWORKS:
        store = measure_throughput(demo_configs(framework), output / "runs", lambda line: print(line, flush=True))
        series[framework] = store.results
    report_dir = create_run_dir(output, "comparison")
    plot_throughput(series, report_dir / "throughput.png", "ResNet-50 training on the CPU, fp32, synthetic data")
    lines = []
    for framework, results in series.items():
        lines += [f"== {framework} ==", format_table(results), ""]
    (report_dir / "report.txt").write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"plot: {report_dir / 'throughput.png'}")
    print(report_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
