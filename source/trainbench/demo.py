"""``make demo``: the main job on an embedded default, on any machine, in a few minutes.

No GPU and no ImageNet needed: a tiny ImageNet-layout tree of real JPEG files is generated (with the odd files
ImageNet has: PNG named .JPEG, CMYK, grayscale, truncated, empty), converted to TFRecords, and a short ResNet-50
throughput sweep runs on it on the CPU for both frameworks, each sweep a normal ``trainbench throughput`` run
with its own folder. Then one table per framework and one comparison plot.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainbench.bench.sweep import measure_throughput
from trainbench.cli.report_gather import write_report
from trainbench.config import BenchConfig, Framework, ModelConfig
from trainbench.data.convert import ConvertOptions, convert
from trainbench.data.synth_tree import SynthOptions, synth
from trainbench.report.console import format_table
from trainbench.report.plot import plot_throughput
from trainbench.results.files import create_run_dir

# Small enough for 2 cores in a few minutes, large enough that the batch sizes differ measurably.
CLASSES, TRAIN_PER_CLASS, VAL_PER_CLASS = 4, 16, 4
BATCH_SIZES = (1, 2, 4)
WARMUP_STEPS = 2
TIMED_STEPS = 6
FRAMEWORKS: tuple[Framework, ...] = ("torch", "tf")


def demo_configs(framework: Framework, data: Path) -> list[BenchConfig]:
    model = ModelConfig(framework=framework, device="cpu", precision="fp32", image_size=224, num_classes=CLASSES)
    return [BenchConfig(model=model, batch_size=size, warmup_steps=WARMUP_STEPS, steps=TIMED_STEPS, data=str(data))
            for size in BATCH_SIZES]


def prepare_data(root: Path) -> Path:
    """Generate the ImageNet-layout tree and convert it; returns the TFRecords folder."""
    tree = root / "imagenet_tiny"
    made = synth(SynthOptions(output=tree, classes=CLASSES, train_per_class=TRAIN_PER_CLASS,
                              val_per_class=VAL_PER_CLASS, odd_cases=True))
    print(f"synthesised {made.images} files ({made.bytes / 1e6:.1f} MB) in {tree}", flush=True)
    summary = convert(ConvertOptions(data_dir=tree, train_shards=2, validation_shards=1), sys.stderr)
    print(f"converted {summary.written} images into {summary.shards} shards in {summary.output}, "
          f"{summary.reencoded} of them re-encoded as RGB JPEG; skipped {summary.skipped} files "
          f"(listed in {summary.output / 'skipped.csv'})", flush=True)
    return summary.output


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m trainbench.demo", description=__doc__)
    parser.add_argument("--output", default="demo_output", help="a new demo folder is made inside")
    args = parser.parse_args(argv)
    root = create_run_dir(Path(args.output), "demo")
    records = prepare_data(root)
    series: dict[str, list[dict[str, Any]]] = {}
    for framework in FRAMEWORKS:
        configs = demo_configs(framework, records)
        series[framework] = measure_throughput(configs, root / "runs", lambda line: print(line, flush=True)).rows()
    plot_throughput(series, root / "throughput.png", "ResNet-50 training on the CPU, fp32, TFRecords input")
    lines = []
    for name, results in series.items():
        lines += [f"== {name} ==", format_table(results), ""]
    (root / "report.txt").write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"plot: {root / 'throughput.png'}")
    report = write_report([root], root / "report.html")
    print(f"report: {report} (one self-contained page: open it in a browser)")
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
