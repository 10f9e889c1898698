"""A record folder no batch can be formed from (no record, or every translation pair longer than --seq-len) ends
in bounded time with one line naming the folder, in both frameworks: an endless pipeline that keeps nothing used
to spin forever."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_main
from tests.record_fixtures import write_records
from trainbench.engines.torch import image_pipeline as torch_pipeline


def test_an_endless_pass_that_keeps_nothing_ends(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "pairs", "translation", records=6, shards=1)

    class NoneKept(torch_pipeline.ShardedRecords):
        def _example(self, payload: bytes, name: str, rng: object) -> None:
            return None  # every record left out, as a --seq-len shorter than every pair leaves them

    assert list(NoneKept(sorted(folder.glob("train-*")), shuffle=True, repeat=True)) == []


@pytest.mark.parametrize("framework", ["torch", pytest.param("tf", marks=pytest.mark.slow)])
def test_input_bench_on_a_folder_of_no_record_is_one_line(tmp_path: Path, framework: str) -> None:
    folder = write_records(tmp_path / "empty", "translation", records=0, shards=1)
    done = run_main("input-bench", str(folder), "--workload", "transformer", "--framework", framework,
                    "--batch-size", "2", "--workers", "1" if framework == "torch" else "2")
    assert_one_line_error(done, f"{folder}: no training batch of 2 samples could be formed" if framework == "torch" else
                          f"--data {folder}: the input pipeline ended after 0 of")
