"""Shape settings bounded per size from the workload's own description, checked before any worker starts: a
sequence no longer than the network's positions (tiny BERT and GPT-2 have 64), in every command and in campaigns."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_main
from tests.record_fixtures import write_records
from trainbench import workloads
from trainbench.campaign.matrix import illegal
from trainbench.config import ModelConfig
from trainbench.errors import UsageError


def test_a_sequence_is_bounded_by_the_sizes_positions() -> None:
    assert workloads.get("bert").bounds("seq_len", "tiny") == (8, 64)
    assert workloads.get("bert").bounds("seq_len", "full") == (8, 512)
    assert workloads.get("gpt2").bounds("seq_len", "tiny") == (8, 64)
    assert workloads.get("transformer").bounds("seq_len", "tiny") == (2, 65536)  # sinusoidal: no position table
    assert workloads.get("resnet50").bounds("image_size", "tiny") == workloads.get("resnet50").bounds("image_size")
    assert ModelConfig(workload="bert", size="tiny", seq_len=64).param("seq_len") == 64
    with pytest.raises(UsageError, match="sequence length of --size tiny gpt2 must be a whole number from 8 to 64, "
                                         "got 65"):
        ModelConfig(workload="gpt2", size="tiny", seq_len=65)


@pytest.mark.parametrize("command", ["throughput", "profile"])
def test_commands_refuse_a_length_the_size_cannot_take_before_any_worker(tmp_path: Path, command: str) -> None:
    argv = ["throughput", "--output", str(tmp_path / "out")] if command == "throughput" else \
        ["profile", "torch", "--output", str(tmp_path / "out")]
    done = run_main(*argv, "--workload", "bert", "--size", "tiny", "--seq-len", "100", "--device", "cpu")
    assert_one_line_error(done, "sequence length of --size tiny bert must be a whole number from 8 to 64, got 100")
    assert not (tmp_path / "out").exists()


def test_records_longer_than_the_size_takes_are_refused_naming_the_folder(tmp_path: Path) -> None:
    folder = write_records(tmp_path / "bert128", "bert", records=2, shards=1,
                           settings={"seq_len": 128, "max_predictions_per_seq": 19, "vocab_size": 512})
    done = run_main("throughput", "--workload", "bert", "--size", "tiny", "--data", str(folder), "--device", "cpu",
                    "--output", str(tmp_path / "out"))
    assert_one_line_error(done, f"--data {folder} holds sequences of 128 tokens",
                          "of --size tiny bert must be a whole number from 8 to 64")
    assert not (tmp_path / "out").exists()


def test_a_campaign_plans_the_size_bound_as_illegal_with_its_reason() -> None:
    assert illegal({"workload": "bert", "size": "tiny", "seq_len": 128}) == \
        "sequence length of --size tiny bert must be a whole number from 8 to 64, got 128"
    assert illegal({"workload": "bert", "size": "full", "seq_len": 128}) is None


def test_data_text_refuses_a_length_no_run_of_the_workload_reads(tmp_path: Path) -> None:
    (tmp_path / "corpus.txt").write_text("One sentence. Another one.\n\nA second document.\n")
    done = run_main("data", "text", str(tmp_path / "corpus.txt"), "--workload", "bert", "--seq-len", "1000",
                    "--output", str(tmp_path / "out"))
    assert_one_line_error(done, "--seq-len 1000: --workload bert reads sequences of 8 to 512 tokens")
    assert not (tmp_path / "out").exists()
