"""The end-to-end training loop, shared by both frameworks through the ``Trainer`` interface."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainbench.config import TrainConfig
from trainbench.results.files import append_json_line
from trainbench.results.layout import FAILURES, METRICS
from trainbench.results.records import BatchResult
from trainbench.training.schedule import learning_rate
from trainbench.training.trainer import Trainer

METRICS_FILE = METRICS
CHECKPOINTS = "checkpoints"
FAILURES_FILE = FAILURES  # why a run stopped early (an allocation failure): one line per stop, kept


# metrics.jsonl's keys as first written: the rate counted the workload's samples under an image name.
RENAMED_METRICS = {"train_images_per_sec": "train_samples_per_sec"}


def upgraded_metrics(row: dict[str, Any]) -> dict[str, Any]:
    """An epoch's row as written today: an older row's keys renamed (``RENAMED_METRICS``), its values as they were."""
    upgraded = dict(row)
    for old, new in RENAMED_METRICS.items():
        if old in upgraded and new not in upgraded:
            upgraded[new] = upgraded.pop(old)
    return upgraded


def append_metrics(run_dir: Path, row: dict[str, Any]) -> None:
    """One JSON line per epoch, flushed to disk so a crash loses at most the epoch in progress."""
    append_json_line(run_dir / METRICS_FILE, row)


def record_failure(run_dir: Path, failure: BatchResult) -> None:
    """Why the run stopped, with the epochs it had finished; a resumed run that stops again adds a line."""
    metrics = run_dir / METRICS_FILE
    finished = len(metrics.read_text().splitlines()) if metrics.exists() else 0
    append_json_line(run_dir / FAILURES_FILE, {**failure.to_row(), "epochs_finished": finished,
                                               "time_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})


def _silent(_: str) -> None:
    """Progress sink for the non-primary processes of a multi-GPU run."""


def train(config: TrainConfig, trainer: Trainer, run_dir: Path, log: Callable[[str], None]) -> list[dict[str, Any]]:
    """Train ``config.epochs`` epochs (continuing after the newest checkpoint); return this call's epoch rows."""
    checkpoints = run_dir / CHECKPOINTS
    checkpoints.mkdir(parents=True, exist_ok=True)
    if not trainer.is_primary:
        log = _silent
    first_epoch = trainer.restore(checkpoints) if config.resume else 0
    if first_epoch:
        log(f"resumed from the checkpoint after epoch {first_epoch}")
    rows = []
    for epoch in range(first_epoch, config.epochs):
        rows.append(_one_epoch(config, trainer, epoch, log))
        if trainer.is_primary:
            append_metrics(run_dir, rows[-1])
        trainer.save(checkpoints, epoch + 1)
    return rows


def _one_epoch(config: TrainConfig, trainer: Trainer, epoch: int, log: Callable[[str], None]) -> dict[str, Any]:
    steps = trainer.steps_per_epoch
    start = time.perf_counter()
    losses = []
    for step in range(steps):
        lr = learning_rate(config, epoch + step / steps)
        trainer.train_step(lr)
        if (step + 1) % config.log_every == 0 or step + 1 == steps:
            losses.append(trainer.mean_loss())  # synchronises: the epoch's wall time below is honest
            elapsed = time.perf_counter() - start
            rate = (step + 1) * trainer.global_batch / elapsed
            log(f"epoch {epoch + 1}/{config.epochs} step {step + 1}/{steps} loss {losses[-1]:.4f} "
                f"lr {lr:.5f} {rate:.1f} {config.model.spec.sample_unit}s/s")
    train_s = time.perf_counter() - start
    evaluation = trainer.evaluate()
    log(f"epoch {epoch + 1}/{config.epochs} eval top1 {evaluation['top1']:.4f} top5 {evaluation['top5']:.4f} "
        f"loss {evaluation['loss']:.4f}")
    loss = losses[-1] if losses else math.nan
    return {
        "epoch": epoch + 1,
        "train_loss": loss,
        "train_samples_per_sec": steps * trainer.global_batch / train_s,  # the workload's samples: images, sequences
        "train_s": train_s,
        "eval_loss": evaluation["loss"],
        "eval_top1": evaluation["top1"],
        "eval_top5": evaluation["top5"],
        "eval_examples": evaluation["examples"],
        "learning_rate_end": learning_rate(config, epoch + 1),
    }
