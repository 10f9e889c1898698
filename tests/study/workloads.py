"""Shape settings of the sequence workloads bounded per size, checked before any worker starts (issue 42): a
``--seq-len`` above a tiny network's 64 positions is one line in ``throughput``, ``profile`` and ``train``, a
campaign plans it as illegal with the reason, and a ``--data`` folder of longer records is refused naming the
folder. ``input-bench`` refuses an option the workload has no use for and ends on a folder of no record.

Record folders are written by ``tests/record_fixtures``' ``write_records`` (with the manifest a converter writes).
"""

from __future__ import annotations

from pathlib import Path

from tests.record_fixtures import write_records
from tests.study import StudyCase

DEVICE = ("--device", "cpu", "--output", "{w}/out")
COMMANDS = {
    "throughput": ("throughput", *DEVICE, "--warmup", "0", "--steps", "1", "--batch-sizes", "2"),
    "profile": ("profile", "torch", *DEVICE, "--start-iteration", "0", "--iterations", "1", "--batch-sizes", "2"),
    "train": ("train", *DEVICE, "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "2", "--eval-steps", "1"),
}
BOUND = "sequence length of --size tiny {workload} must be a whole number from 8 to 64, got {length}"


def build(world: Path) -> None:
    write_records(world / "bert128", "bert", records=2, shards=1,
                  settings={"seq_len": 128, "max_predictions_per_seq": 19, "vocab_size": 512})
    write_records(world / "bert", "bert", records=2, shards=1)
    write_records(world / "no_pairs", "translation", records=0, shards=1)
    (world / "long.yaml").write_text("axes: {workload: [bert], size: [tiny], seq_len: [128], batch_size: [2], "
                                     "device: [cpu]}\nwarmup: 0\nsteps: 1\n")
    (world / "mixed.yaml").write_text("axes: {workload: [bert], size: [tiny], seq_len: [32, 128], batch_size: [2], "
                                      "device: [cpu]}\nwarmup: 0\nsteps: 1\n")


def _cases() -> list[StudyCase]:
    cases = []
    for name, command in COMMANDS.items():
        cases += [
            StudyCase(f"{name} tiny bert seq_len above its positions",
                      (*command, "--workload", "bert", "--size", "tiny", "--seq-len", "100"),
                      (BOUND.format(workload="bert", length=100),), kind="exit-code"),
            StudyCase(f"{name} tiny gpt2 seq_len one above its positions",
                      (*command, "--workload", "gpt2", "--size", "tiny", "--seq-len", "65"),
                      (BOUND.format(workload="gpt2", length=65),), kind="exit-code"),
        ]
    cases += [
        StudyCase("throughput records longer than the tiny size takes",
                  (*COMMANDS["throughput"], "--workload", "bert", "--size", "tiny", "--data", "{w}/bert128"),
                  ("--data {w}/bert128 holds sequences of 128 tokens",
                   "of --size tiny bert must be a whole number from 8 to 64"), kind="exit-code"),
        StudyCase("campaign whose only seq_len is above the positions", ("campaign", "run", "{w}/long.yaml",
                                                                        "--output", "{w}/campaign"),
                  ("no legal combination is left", BOUND.format(workload="bert", length=128)), kind="exit-code"),
        StudyCase("campaign plans seq_len above the positions as illegal", ("campaign", "run", "{w}/mixed.yaml",
                                                                           "--dry-run"),
                  ("tiny-seq32-cpu", "= 1 runs (1 of 2 combinations excluded or illegal)"), exit=0,
                  absent=("seq128",),
                  kind="exit-code"),
        StudyCase("input-bench bert with an image size", ("input-bench", "{w}/bert", "--workload", "bert",
                                                          "--image-size", "64"),
                  ("--image-size does not apply to --workload bert (its settings: seq_len)",), kind="silent-option"),
        StudyCase("input-bench on a folder of no record", ("input-bench", "{w}/no_pairs", "--workload", "transformer",
                                                           "--batch-size", "2", "--workers", "1"),
                  ("{w}/no_pairs: no training batch of 2 samples could be formed",), kind="hang"),
    ]
    return cases


CASES = _cases()
