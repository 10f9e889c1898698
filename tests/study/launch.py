"""Launch options of throughput, profile and train: process counts are bounded, rendezvous addresses checked, and
no option is recorded that the run would not use."""

from __future__ import annotations

import os
from pathlib import Path

from tests.study import StudyCase

CORES = len(os.sched_getaffinity(0))
TINY = ("--device", "cpu", "--image-size", "32", "--output", "{w}/out")
COMMANDS = {
    "throughput": ("throughput", *TINY, "--warmup", "0", "--steps", "1", "--batch-sizes", "2"),
    "profile": ("profile", "torch", *TINY, "--start-iteration", "0", "--iterations", "1", "--batch-sizes", "2"),
    "train": ("train", *TINY, "--epochs", "1", "--steps-per-epoch", "1", "--batch-size", "2", "--eval-steps", "1"),
}


def build(world: Path) -> None:
    """A campaign matrix asking for one CPU process more than the cores (the rest is refused before any folder)."""
    (world / "many.yaml").write_text("axes: {framework: [torch], batch_size: [2], image_size: [32], device: [cpu], "
                                     f"gpus: [{CORES + 1}]}}\nwarmup: 0\nsteps: 1\n")


def _cases() -> list[StudyCase]:
    cases = []
    for name, command in COMMANDS.items():
        cases += [
            StudyCase(f"{name} 1000 processes on the CPU", (*command, "--gpus", "1000"), ("--gpus 1000", "core"),
                      kind="resources"),
            StudyCase(f"{name} one process more than the cores", (*command, "--gpus", str(CORES + 1)),
                      (f"--gpus {CORES + 1}", f"{CORES} core", "--oversubscribe"), kind="resources"),
            StudyCase(f"{name} processes beyond the ceiling", (*command, "--gpus", "5000", "--oversubscribe"),
                      ("--gpus",), kind="resources"),
            StudyCase(f"{name} nodes beyond the ceiling", (*command, "--nodes", "100000"), ("--nodes",),
                      kind="resources"),
            StudyCase(f"{name} endpoint without a port", (*command, "--gpus", "2", "--rdzv-endpoint", "host"),
                      ("--rdzv-endpoint 'host'", "HOST:PORT"), kind="exit-code"),
            StudyCase(f"{name} endpoint with a word for a port",
                      (*command, "--gpus", "2", "--rdzv-endpoint", "host:port"), ("--rdzv-endpoint", "'port'"),
                      kind="exit-code"),
            StudyCase(f"{name} endpoint of colons", (*command, "--gpus", "2", "--rdzv-endpoint", ":::"),
                      ("--rdzv-endpoint ':::'",), kind="exit-code"),
            StudyCase(f"{name} endpoint port 0", (*command, "--gpus", "2", "--rdzv-endpoint", "h:0"),
                      ("--rdzv-endpoint", "65535"), kind="exit-code"),
            StudyCase(f"{name} endpoint port too large", (*command, "--gpus", "2", "--rdzv-endpoint", "h:70000"),
                      ("--rdzv-endpoint", "65535"), kind="exit-code"),
            StudyCase(f"{name} bare IPv6 endpoint", (*command, "--gpus", "2", "--rdzv-endpoint", "::1:29500"),
                      ("--rdzv-endpoint", "brackets"), kind="exit-code"),
            StudyCase(f"{name} endpoint with a space", (*command, "--gpus", "2", "--rdzv-endpoint", "a b:29500"),
                      ("--rdzv-endpoint", "'a b'"), kind="exit-code"),
            StudyCase(f"{name} endpoint one process would ignore", (*command, "--rdzv-endpoint", "h:29500"),
                      ("--rdzv-endpoint", "torchrun"), kind="silent-option"),
            StudyCase(f"{name} rendezvous id one process would ignore", (*command, "--rdzv-id", "job7"),
                      ("--rdzv-id", "torchrun"), kind="silent-option"),
            StudyCase(f"{name} several nodes without an endpoint", (*command, "--nodes", "2"),
                      ("--nodes above 1", "--rdzv-endpoint"), kind="exit-code"),
        ]
    tf = ("throughput", "--framework", "tf", *TINY, "--warmup", "0", "--steps", "1", "--batch-sizes", "2")
    cases += [
        StudyCase("tf endpoint on one node", (*tf, "--rdzv-endpoint", "h:29500"), ("--rdzv-endpoint", "TensorFlow"),
                  kind="silent-option"),
        StudyCase("tf several processes", (*tf, "--gpus", "2"), ("--gpus", "MirroredStrategy"), kind="exit-code"),
    ]
    cases.append(StudyCase("campaign of more processes than cores", ("campaign", "run", "{w}/many.yaml", "--output",
                                                                     "{w}/campaign"),
                           (f"gpus {CORES + 1}", f"{CORES} core"), writes=True, kind="resources"))
    return cases


CASES = _cases()
