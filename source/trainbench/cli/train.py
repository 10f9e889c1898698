"""``trainbench train``: end-to-end ResNet-50 training with the original suite's defaults."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from trainbench.bench.store import create_run_dir, write_json_atomic
from trainbench.cli.options import add_model_options, existing_data_dir, model_config
from trainbench.config import ModelConfig, OptimizerConfig, TrainConfig, to_dict
from trainbench.engines import load_engine
from trainbench.errors import UsageError
from trainbench.telemetry.env import collect_env
from trainbench.training.loop import train

CONFIG_FILE = "config.json"


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train",
        help="train ResNet-50 end to end, evaluating every epoch",
        description="Train ResNet-50 (90 epochs, global batch 384 split over the GPUs, SGD momentum 0.9, "
        "linear warm-up then x0.1 at epochs 30/60/80, label smoothing 0.1, weight decay 1e-4). "
        "Each run gets a new folder with config.json, env.json, metrics.jsonl and checkpoints/.",
    )
    add_model_options(parser)
    parser.add_argument("--epochs", type=int, help="epochs in all (default 90)")
    parser.add_argument("--batch-size", type=int, default=384, help="global batch, split over the GPUs")
    parser.add_argument("--base-lr", type=float, default=0.1, help="learning rate per 256 images (default 0.1)")
    parser.add_argument("--momentum", type=float, default=0.9)
    parser.add_argument("--weight-decay", type=float, default=1e-4)
    parser.add_argument("--label-smoothing", type=float, default=0.1)
    parser.add_argument("--warmup-epochs", type=float, default=5.0)
    parser.add_argument("--decay-epochs", default="30,60,80", help="epochs where the rate is multiplied by 0.1")
    parser.add_argument("--steps-per-epoch", type=int, help="default: one pass over the training set")
    parser.add_argument("--eval-steps", type=int, help="default: one pass over the evaluation set")
    parser.add_argument("--synthetic-train-examples", type=int, default=1281)
    parser.add_argument("--synthetic-eval-examples", type=int, default=50)
    parser.add_argument("--data", metavar="DIR", help="TFRecords folder (default: a synthetic data set)")
    parser.add_argument("--output", default="train_data", metavar="DIR", help="a new run folder is made inside")
    parser.add_argument("--resume", metavar="RUN_DIR", help="continue a run from its newest checkpoint "
                        "(its saved configuration is used; --epochs may extend it)")
    parser.add_argument("--log-every", type=int, default=100, metavar="N", help="progress line every N steps")
    parser.set_defaults(run=run)


def _decay_epochs(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(token) for token in text.replace(",", " ").split())
    except ValueError:
        raise UsageError(f"--decay-epochs {text!r}: expected whole numbers such as 30,60,80") from None


def new_config(args: argparse.Namespace) -> TrainConfig:
    optimizer = OptimizerConfig(momentum=args.momentum, base_learning_rate=args.base_lr,
                                weight_decay=args.weight_decay, label_smoothing=args.label_smoothing)
    return TrainConfig(
        model=model_config(args), optimizer=optimizer, epochs=args.epochs or 90, batch_size=args.batch_size,
        warmup_epochs=args.warmup_epochs, decay_epochs=_decay_epochs(args.decay_epochs),
        data=existing_data_dir(args.data), synthetic_train_examples=args.synthetic_train_examples,
        synthetic_eval_examples=args.synthetic_eval_examples, steps_per_epoch=args.steps_per_epoch,
        eval_steps=args.eval_steps, output=args.output, log_every=args.log_every,
    )


def resumed_config(run_dir: Path, epochs: int | None) -> TrainConfig:
    path = run_dir / CONFIG_FILE
    try:
        raw = json.loads(path.read_text())
        raw["model"] = ModelConfig(**raw["model"])
        raw["optimizer"] = OptimizerConfig(**raw["optimizer"])
        raw["decay_epochs"] = tuple(raw["decay_epochs"])
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(f"{path}: not a trainbench training run ({type(error).__name__}: {error})") from None
    raw.update(resume=True, epochs=epochs or raw["epochs"])
    return TrainConfig(**raw)


def run(args: argparse.Namespace) -> int:
    if args.resume:
        run_dir = Path(args.resume)
        config = resumed_config(run_dir, args.epochs)
    else:
        config = new_config(args)
        run_dir = create_run_dir(Path(config.output), f"train_{config.model.framework}_{config.model.precision}")
    write_json_atomic(run_dir / CONFIG_FILE, to_dict(config))
    write_json_atomic(run_dir / "env.json", collect_env(sys.argv))
    print(f"run folder: {run_dir}", flush=True)
    engine = load_engine(config.model.framework)
    trainer = engine.make_trainer(config)
    rows = train(config, trainer, run_dir, lambda line: print(line, flush=True))
    if rows:
        last = rows[-1]
        print(f"final: epoch {last['epoch']} top1 {last['eval_top1']:.4f} top5 {last['eval_top5']:.4f}")
    print(run_dir)
    return 0
