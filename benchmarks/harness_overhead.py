"""How much does the suite's harness cost? Suite images/s against a bare hand-written training loop.

For each framework, the same model, batch size and precision run alternately (interleaved, so drift in the
machine's speed hits both alike): the suite through ``trainbench throughput`` (a worker process, the timed window),
and a bare loop in a fresh process that does nothing but the training step between two clock reads. The ratio of
the medians is printed; the suite should reach at least 97 % of the bare loop.

    python benchmarks/harness_overhead.py [--frameworks torch,tf] [--repeats 5] [--batch 4] [--image-size 224]

Exits 1 if a ratio is below --threshold (default 0.97). Prints one JSON line with all figures last.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"}


def bare_torch(batch: int, image_size: int, warmup: int, steps: int) -> float:
    import torch
    import torchvision

    torch.manual_seed(0)
    model = torchvision.models.resnet50(num_classes=1000)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    images = torch.randn(batch, 3, image_size, image_size)
    labels = torch.randint(0, 1000, (batch,))
    loss_fn = torch.nn.CrossEntropyLoss()
    for i in range(warmup + steps):
        if i == warmup:
            start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss_fn(model(images), labels).backward()
        optimizer.step()
    return batch * steps / (time.perf_counter() - start)


def bare_tf(batch: int, image_size: int, warmup: int, steps: int) -> float:
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    import tensorflow as tf
    import tf_keras
    from official.legacy.image_classification.resnet import resnet_model

    tf.random.set_seed(0)
    model = resnet_model.resnet50(num_classes=1000)
    optimizer = tf_keras.optimizers.SGD(learning_rate=0.1, momentum=0.9)
    images = tf.random.normal((batch, image_size, image_size, 3))
    labels = tf.one_hot(tf.random.uniform((batch,), maxval=1000, dtype=tf.int32), 1000)
    loss_fn = tf_keras.losses.CategoricalCrossentropy()

    @tf.function
    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True)) + tf.add_n(model.losses)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    for i in range(warmup + steps):
        if i == warmup:
            tf.test.experimental.sync_devices()
            start = time.perf_counter()
        step()
    tf.test.experimental.sync_devices()
    return batch * steps / (time.perf_counter() - start)


def run_bare(framework: str, args: argparse.Namespace) -> float:
    command = [sys.executable, __file__, "--bare", framework, "--batch", str(args.batch),
               "--image-size", str(args.image_size), "--warmup", str(args.warmup), "--steps", str(args.steps)]
    out = subprocess.run(command, capture_output=True, text=True, env=ENV, check=True).stdout
    return float(out.strip().splitlines()[-1])


def run_suite(framework: str, args: argparse.Namespace, output: Path) -> float:
    command = [sys.executable, "-m", "trainbench", "throughput", "--framework", framework, "--device", "cpu",
               "--batch-sizes", str(args.batch), "--image-size", str(args.image_size),
               "--warmup", str(args.warmup), "--steps", str(args.steps), "--output", str(output)]
    run_dir = subprocess.run(command, capture_output=True, text=True, env=ENV, check=True).stdout.splitlines()[-1]
    result = json.loads((Path(run_dir) / "summary.json").read_text())["results"][0]
    if result["status"] != "ok":
        raise RuntimeError(f"suite run failed: {result['error']}")
    return result["samples_per_sec"]


def compare(framework: str, args: argparse.Namespace, output: Path) -> dict[str, object]:
    suite, bare = [], []
    for repeat in range(args.repeats):
        suite.append(run_suite(framework, args, output))
        bare.append(run_bare(framework, args))
        print(f"{framework} repeat {repeat + 1}: suite {suite[-1]:.3f} images/s, bare {bare[-1]:.3f} images/s",
              flush=True)
    ratio = statistics.median(suite) / statistics.median(bare)
    return {"framework": framework, "suite_images_per_sec": suite, "bare_images_per_sec": bare,
            "suite_median": statistics.median(suite), "bare_median": statistics.median(bare), "ratio": ratio}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--frameworks", default="torch,tf")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--steps", type=int, default=12)
    parser.add_argument("--threshold", type=float, default=0.97)
    parser.add_argument("--bare", choices=("torch", "tf"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        bare = bare_torch if args.bare == "torch" else bare_tf
        print(bare(args.batch, args.image_size, args.warmup, args.steps))
        return 0
    rows = []
    with tempfile.TemporaryDirectory() as output:
        for framework in args.frameworks.split(","):
            rows.append(compare(framework, args, Path(output)))
    for row in rows:
        print(f"{row['framework']}: suite {row['suite_median']:.3f} / bare {row['bare_median']:.3f} images/s "
              f"= {row['ratio']:.3f} (batch {args.batch}, {args.image_size}px, fp32, CPU, "
              f"{args.repeats} interleaved repeats, medians)")
    print(json.dumps({"batch": args.batch, "image_size": args.image_size, "steps": args.steps, "results": rows}))
    return 0 if all(row["ratio"] >= args.threshold for row in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
