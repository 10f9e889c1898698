"""``make demo``: the main job on an embedded default, on any machine, in a few minutes.

No GPU and no ImageNet needed: a tiny ImageNet-layout tree of real JPEG files is generated (with the odd files
ImageNet has: PNG named .JPEG, CMYK, grayscale, truncated, empty), converted to TFRecords, and a short ResNet-50
throughput sweep runs on it on the CPU for both frameworks, each sweep a normal ``trainbench throughput`` run
with its own folder. Then a tiny language model (BERT at ``--size tiny``, synthetic tokens) runs in both
frameworks, to show a second kind of network in its own unit (sequences/s and tokens/s). Then one table per run,
one comparison plot of the ResNet-50 runs, and the report of all of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from trainbench import workloads
from trainbench.bench.sweep import measure_throughput
from trainbench.config import BenchConfig, Framework, ModelConfig
from trainbench.data.convert import ConvertOptions, convert
from trainbench.data.synth_tree import SynthOptions, synth
from trainbench.render.console import format_table
from trainbench.render.plot import plot_throughput
from trainbench.report.gather import write_report
from trainbench.results.files import create_run_dir
from trainbench.workloads.resnet50 import RESNET50

# Small enough for 2 cores in a few minutes, large enough that the batch sizes differ measurably.
CLASSES, TRAIN_PER_CLASS, VAL_PER_CLASS = 4, 16, 4
BATCH_SIZES = (1, 2, 4)
WARMUP_STEPS = 2
TIMED_STEPS = 6
FRAMEWORKS: tuple[Framework, ...] = ("torch", "tf")
# One tiny language model beside ResNet-50: attention and embedding kernels instead of convolutions.
LANGUAGE_MODEL = "bert"
LANGUAGE_MODEL_BATCH_SIZES = (4, 16)


def demo_configs(framework: Framework, data: Path) -> list[BenchConfig]:
    model = ModelConfig(framework=framework, device="cpu", precision="fp32", image_size=224, num_classes=CLASSES)
    return [BenchConfig(model=model, batch_size=size, warmup_steps=WARMUP_STEPS, steps=TIMED_STEPS, data=str(data))
            for size in BATCH_SIZES]


def language_model_configs(framework: Framework) -> list[BenchConfig]:
    model = ModelConfig(framework=framework, device="cpu", precision="fp32", workload=LANGUAGE_MODEL, size="tiny")
    return [BenchConfig(model=model, batch_size=size, warmup_steps=WARMUP_STEPS, steps=TIMED_STEPS)
            for size in LANGUAGE_MODEL_BATCH_SIZES]


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
    language_model: dict[str, list[dict[str, Any]]] = {}
    for framework in FRAMEWORKS:
        configs = demo_configs(framework, records)
        series[framework] = measure_throughput(configs, root / "runs", lambda line: print(line, flush=True)).rows()
    for framework in FRAMEWORKS:
        configs = language_model_configs(framework)
        language_model[framework] = measure_throughput(configs, root / "runs",
                                                       lambda line: print(line, flush=True)).rows()
    plot_throughput(series, root / "throughput.png", "ResNet-50 training on the CPU, fp32, TFRecords input")
    lines = []
    for name, results in series.items():
        lines += [f"== ResNet-50, {name} ==", format_table(results, RESNET50.sample_unit), ""]
    language = workloads.get(LANGUAGE_MODEL)
    for name, results in language_model.items():
        lines += [f"== {language.title} (tiny, synthetic tokens), {name} ==",
                  format_table(results, language.sample_unit), ""]
    (root / "report.txt").write_text("\n".join(lines))
    print("\n".join(lines))
    print(f"plot: {root / 'throughput.png'}")
    report = write_report([root], root / "report.html")
    print(f"report: {report} (one self-contained page: open it in a browser)")
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
