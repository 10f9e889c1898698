"""``trainbench train``: end-to-end training of a workload's network (``--workload``, default resnet50) with the
original suite's ResNet-50 recipe as its defaults."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

from trainbench.cli.options import (
    DATA_DIR_HELP,
    POSITIVE,
    add_choice_option,
    add_launch_options,
    add_loader_option,
    add_model_options,
    existing_data_dir,
    launch_config,
    model_config,
    path_text,
    real_number,
    whole_number,
    whole_numbers,
)
from trainbench.config import (
    MAX_BATCH_SIZE,
    MAX_COUNT,
    OPTIMIZERS,
    ConfigError,
    OptimizerConfig,
    TrainConfig,
    field_default,
    to_dict,
    train_config_from_dict,
)
from trainbench.engines import load_engine
from trainbench.engines.base import Engine
from trainbench.engines.launchers import launcher_command
from trainbench.errors import UsageError, os_reason
from trainbench.results.failure import is_out_of_memory, one_line
from trainbench.results.files import create_run_dir, write_json_atomic
from trainbench.results.layout import ENV, TRAIN_CONFIG
from trainbench.results.records import BatchResult, Status
from trainbench.telemetry.env import collect_env
from trainbench.training.loop import FAILURES_FILE, record_failure, train

CONFIG_FILE = TRAIN_CONFIG
EPOCHS = field_default(TrainConfig, "epochs")  # --epochs has no argparse default: --resume must see it unset


def _prose(number: float) -> str:
    """A number as the help texts write it: 0.1, 384, 1e-4 (not 0.0001)."""
    if 0 < abs(number) < 1e-3:
        mantissa, _, exponent = f"{number:e}".partition("e")
        return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"
    return f"{number:g}"


def _description() -> str:
    """The original suite's recipe, as TrainConfig's defaults give it."""
    optimizer = field_default(TrainConfig, "optimizer")
    decay_epochs = "/".join(str(epoch) for epoch in field_default(TrainConfig, "decay_epochs"))
    return ("Train the workload's network (--workload, default resnet50) with the original suite's ResNet-50 recipe "
            f"as defaults ({EPOCHS} epochs, global batch {field_default(TrainConfig, 'batch_size')} split over "
            f"the GPUs, SGD momentum {_prose(optimizer.momentum)}, linear warm-up then "
            f"x{_prose(field_default(TrainConfig, 'decay_factor'))} at epochs {decay_epochs}, label smoothing "
            f"{_prose(optimizer.label_smoothing)}, weight decay {_prose(optimizer.weight_decay)}). "
            "Each run gets a new folder with config.json, env.json, metrics.jsonl and checkpoints/ (and failures.jsonl "
            "when a batch cannot be allocated).")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "train", help="train the workload's network end to end, evaluating every epoch", description=_description())
    add_model_options(parser)
    _add_schedule_options(parser)
    parser.add_argument("--steps-per-epoch", type=POSITIVE, help="default: one pass over the training set")
    parser.add_argument("--eval-steps", type=POSITIVE, help="default: one pass over the evaluation set")
    parser.add_argument("--synthetic-train-examples", type=POSITIVE,
                        default=field_default(TrainConfig, "synthetic_train_examples"))
    parser.add_argument("--synthetic-eval-examples", type=POSITIVE,
                        default=field_default(TrainConfig, "synthetic_eval_examples"))
    parser.add_argument("--data", type=path_text, metavar="DIR",
                        help=f"{DATA_DIR_HELP} (default: a synthetic data set)")
    add_loader_option(parser)
    parser.add_argument("--output", type=path_text, default=field_default(TrainConfig, "output"), metavar="DIR",
                        help="a new run folder is made inside")
    parser.add_argument("--resume", type=path_text, metavar="RUN_DIR", help="continue a run from its newest "
                        "checkpoint (its saved configuration is used; --epochs may extend it)")
    parser.add_argument("--log-every", type=POSITIVE, default=field_default(TrainConfig, "log_every"), metavar="N",
                        help="progress line every N steps")
    add_launch_options(parser)
    # Each torchrun process of a --gpus run: `trainbench train --rank-of RUN_DIR` trains the run's saved configuration.
    parser.add_argument("--rank-of", type=path_text, help=argparse.SUPPRESS)
    parser.set_defaults(run=run)


def _add_schedule_options(parser: argparse.ArgumentParser) -> None:
    """Epochs, batch and the optimizer's settings, with TrainConfig's defaults."""
    batch_size, optimizer = field_default(TrainConfig, "batch_size"), field_default(TrainConfig, "optimizer")
    decay_epochs = field_default(TrainConfig, "decay_epochs")
    parser.add_argument("--epochs", type=POSITIVE, help=f"epochs in all (default {EPOCHS})")
    parser.add_argument("--batch-size", type=whole_number(1, MAX_BATCH_SIZE), default=batch_size,
                        help=f"global batch, split over the GPUs (default {batch_size}, at most {MAX_BATCH_SIZE})")
    parser.add_argument("--base-lr", type=real_number(0.0, above=True), default=optimizer.base_learning_rate,
                        help=f"learning rate per 256 samples (default {_prose(optimizer.base_learning_rate)})")
    add_choice_option(parser, "--optimizer", OPTIMIZERS, optimizer.name,
                      "adamw: decoupled weight decay, betas 0.9 and 0.999, as the language models' references train "
                      "(give it a --base-lr near 0.001 x 256 / batch)")
    parser.add_argument("--momentum", type=real_number(0.0, 1.0, below=True), default=optimizer.momentum,
                        help=f"SGD's (default {_prose(optimizer.momentum)})")
    parser.add_argument("--weight-decay", type=real_number(0.0), default=optimizer.weight_decay)
    parser.add_argument("--label-smoothing", type=real_number(0.0, 1.0, below=True), default=optimizer.label_smoothing)
    parser.add_argument("--warmup-epochs", type=real_number(0.0, MAX_COUNT),
                        default=field_default(TrainConfig, "warmup_epochs"))
    parser.add_argument("--decay-epochs", type=whole_numbers(0, increasing=True), default=decay_epochs,
                        help="increasing epochs where the rate is multiplied by "
                        f"{_prose(field_default(TrainConfig, 'decay_factor'))} "
                        f"(default {','.join(str(epoch) for epoch in decay_epochs)})")


def new_config(args: argparse.Namespace) -> TrainConfig:
    optimizer = OptimizerConfig(name=args.optimizer, momentum=args.momentum, base_learning_rate=args.base_lr,
                                weight_decay=args.weight_decay, label_smoothing=args.label_smoothing)
    model = model_config(args)  # once: it resolves the device and opens the data folder
    if problem := model.spec.train_problem():  # before a run folder is made
        raise UsageError(problem)
    return TrainConfig(
        model=model, optimizer=optimizer, epochs=args.epochs or EPOCHS, batch_size=args.batch_size,
        warmup_epochs=args.warmup_epochs, decay_epochs=args.decay_epochs,
        data=existing_data_dir(args.data), loader=args.loader, synthetic_train_examples=args.synthetic_train_examples,
        synthetic_eval_examples=args.synthetic_eval_examples, steps_per_epoch=args.steps_per_epoch,
        eval_steps=args.eval_steps, output=args.output, log_every=args.log_every,
        launch=launch_config(args, model),
    )


def resumed_config(run_dir: Path, epochs: int | None) -> TrainConfig:
    """The run's own configuration from its config.json; one that cannot be read or is malformed is one line naming
    the file."""
    saved = _saved_config(run_dir)
    if epochs is not None and epochs < saved.epochs:  # config.json would lose the run's own plan
        raise UsageError(f"--epochs {epochs}: {run_dir} already trains for {saved.epochs} epochs; "
                         "--epochs can only extend it")
    return dataclasses.replace(saved, resume=True, epochs=epochs or saved.epochs)


def _saved_config(run_dir: Path) -> TrainConfig:
    path = run_dir / CONFIG_FILE
    try:
        saved = train_config_from_dict(json.loads(path.read_text()))
    except (OSError, ValueError) as error:  # unreadable, not JSON
        raise UsageError(f"{path}: not a trainbench training run ({type(error).__name__}: {error})") from None
    except ConfigError as error:  # JSON, but not a training configuration
        raise UsageError(f"{path}: not a trainbench training run ({error})") from None
    except UsageError as error:  # a value out of bounds (an edited file): say which file holds it
        raise UsageError(f"{path}: {error}") from None
    return saved


def _start_record(run_dir: Path, config: TrainConfig) -> None:
    """config.json and env.json; a run folder that cannot be written (read-only, not a folder) is named in one line."""
    try:
        write_json_atomic(run_dir / CONFIG_FILE, to_dict(config))
        write_json_atomic(run_dir / ENV, collect_env(sys.argv))
    except OSError as error:
        raise UsageError(f"{run_dir}: cannot write the run's files there ({os_reason(error)})") from None


def _train(config: TrainConfig, engine: Engine, run_dir: Path) -> int:
    """Train; an allocation failure (the batch does not fit) is recorded in the run folder and named in one line."""
    try:
        trainer = engine.make_trainer(config)
        rows = train(config, trainer, run_dir, lambda line: print(line, flush=True))
        rows = rows if trainer.is_primary else []  # one process of several says the result
    except Exception as error:
        if not is_out_of_memory(error):
            raise
        record_failure(run_dir, BatchResult.failed(config.batch_size, Status.OOM, one_line(error)))
        print(f"trainbench: train: out of memory at batch size {config.batch_size}: {one_line(error)} "
              f"(recorded in {run_dir / FAILURES_FILE})", file=sys.stderr)
        return 1
    if rows:
        last = rows[-1]
        print(f"final: epoch {last['epoch']} top1 {last['eval_top1']:.4f} top5 {last['eval_top5']:.4f}")
    return 0


def _launch(launcher: list[str], run_dir: Path) -> int:
    """The run's processes under the engine's launcher (each one ``trainbench train --rank-of RUN_DIR``); their
    exit status."""
    return subprocess.run([*launcher, "trainbench", "train", "--rank-of", str(run_dir)], check=False).returncode


def run(args: argparse.Namespace) -> int:
    if args.rank_of:  # one process of a torchrun launch: the parent wrote the run's files
        run_dir = Path(args.rank_of)
        config = _saved_config(run_dir)  # as the parent wrote it, resumed or new
        return _train(config, load_engine(config.model.framework), run_dir)
    if args.resume:
        run_dir = Path(args.resume)
        config = resumed_config(run_dir, args.epochs)
    else:
        config = new_config(args)
        run_dir = create_run_dir(Path(config.output), f"train_{config.model.framework}_{config.model.precision}")
    _start_record(run_dir, config)
    print(f"run folder: {run_dir}", flush=True)
    if launcher := launcher_command(config.model.framework, config.launch):
        status = _launch(launcher, run_dir)
    else:
        status = _train(config, load_engine(config.model.framework), run_dir)
    print(run_dir)
    return status
