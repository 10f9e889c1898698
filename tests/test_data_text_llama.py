"""``trainbench data text --workload llama``: the causal-LM records gpt2 and llama both read, at llama's lengths.

The corpus is ``data synth-text``'s (Python's own docstrings), cut small; the vocabularies are tiny (300 tokens:
under tiny llama's 512; 600: over it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench import workloads
from trainbench.data.shards import shard_files
from trainbench.data.text_synth import synth_text
from trainbench.data.tfrecord_reader import parse_example, read_records

SMALL_VOCABULARY = 300  # byte-level BPE's 256 bytes, <|endoftext|> and a few merges: fewer than tiny llama's 512
LARGE_VOCABULARY = 600  # more than tiny llama's 512 (the corpus gives that many)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_text(tmp_path_factory.mktemp("text"), documents=80, pairs=1).output / "corpus"


def _convert(corpus: Path, output: Path, workload: str, *options: str) -> Any:  # the CompletedProcess
    return run_main("data", "text", str(corpus), "--workload", workload, "--output", str(output), "--workers", "1",
                    *options)


def _manifest(folder: Path) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((folder / "manifest.json").read_text())
    return manifest


def _blocks(folder: Path) -> list[list[int]]:
    return [list(parse_example(payload)["input_ids"]) for path in shard_files(folder)  # type: ignore[arg-type]
            for payload in read_records(path)]


def test_llama_records_are_gpt2_records_at_the_lengths_llama_reads(corpus: Path, tmp_path: Path) -> None:
    llama = workloads.get("llama")
    # No --seq-len: what llama trains at (8,192), from its descriptor, not gpt2's 1,024.
    default = tmp_path / "default"
    done = _convert(corpus, default, "llama", "--vocab-size", str(SMALL_VOCABULARY), "--shards", "1")
    assert done.returncode == 0, done.stderr
    assert "gpt2 records in 1 shards" in done.stdout
    manifest = _manifest(default)
    length = llama.default("seq_len")
    assert manifest["kind"] == "gpt2" and length > 1024
    assert manifest["settings"] == {"seq_len": length, "block_len": length + 1, "vocab_size": SMALL_VOCABULARY}
    blocks = _blocks(default)
    assert blocks and all(len(block) == length + 1 and max(block) < SMALL_VOCABULARY for block in blocks)

    # Above GPT-2's 1,024 positions: llama's bounds take it, gpt2's refuse it in one line (the same corpus).
    longer = tmp_path / "longer"
    done = _convert(corpus, longer, "llama", "--vocab-size", str(SMALL_VOCABULARY), "--shards", "1",
                    "--seq-len", "2048")
    assert done.returncode == 0, done.stderr
    assert _manifest(longer)["settings"]["seq_len"] == 2048
    assert {len(block) for block in _blocks(longer)} == {2049}
    low, high = workloads.get("gpt2").bounds("seq_len")
    assert_one_line_error(_convert(corpus, tmp_path / "gpt2", "gpt2", "--seq-len", "2048"),
                          f"--seq-len 2048: --workload gpt2 reads sequences of {low} to {high} tokens")
    assert not (tmp_path / "gpt2").exists()

    # One record kind, one writer: at the same settings llama's folder is gpt2's, byte for byte.
    same = ("--vocab-size", str(SMALL_VOCABULARY), "--shards", "2", "--seq-len", "64")
    for workload in ("llama", "gpt2"):
        done = _convert(corpus, tmp_path / f"same-{workload}", workload, *same)
        assert done.returncode == 0, done.stderr
    files = [{path.name: path.read_bytes() for path in sorted((tmp_path / f"same-{workload}").iterdir())
              if not path.name.startswith(".")} for workload in ("llama", "gpt2")]
    assert files[0] == files[1] and "vocab.json" in files[0] and len(shard_files(tmp_path / "same-llama")) == 2


@pytest.mark.slow  # the one end-to-end run: a real throughput process and its worker
def test_tiny_llama_trains_on_the_records_data_text_wrote(corpus: Path, tmp_path: Path) -> None:
    data = tmp_path / "llama32"
    done = _convert(corpus, data, "llama", "--vocab-size", str(SMALL_VOCABULARY), "--seq-len", "32", "--shards", "2")
    assert done.returncode == 0, done.stderr
    vocab = _manifest(data)["settings"]["vocab_size"]
    assert vocab < workloads.get("llama").dims("tiny")["vocab"]  # a smaller vocabulary than the model's is read
    out = tmp_path / "out"
    run = run_cli("throughput", "--workload", "llama", "--size", "tiny", "--device", "cpu", "--data", str(data),
                  "--batch-sizes", "2", "--warmup", "1", "--steps", "2", "--telemetry-interval", "0",
                  "--output", str(out))
    assert run.returncode == 0, run.stderr
    (summary_path,) = out.glob("*/summary.json")
    summary = json.loads(summary_path.read_text())
    assert summary["workload"] == "llama" and summary["data"] == str(data.resolve())
    assert summary["params"]["seq_len"] == 32  # the records' length, --seq-len not given
    assert [result["status"] for result in summary["results"]] == ["ok"]
    assert summary["results"][0]["samples_per_sec"] > 0


def test_records_with_more_tokens_than_tiny_llamas_vocabulary_are_refused_in_one_line(corpus: Path,
                                                                                    tmp_path: Path) -> None:
    data = tmp_path / "llama600"
    done = _convert(corpus, data, "llama", "--vocab-size", str(LARGE_VOCABULARY), "--seq-len", "32")
    assert done.returncode == 0, done.stderr
    vocab = _manifest(data)["settings"]["vocab_size"]
    model = workloads.get("llama").dims("tiny")["vocab"]
    assert vocab > model
    out = tmp_path / "out"
    refused = run_main("throughput", "--workload", "llama", "--size", "tiny", "--device", "cpu", "--data", str(data),
                       "--batch-sizes", "2", "--warmup", "1", "--steps", "2", "--telemetry-interval", "0",
                       "--output", str(out))
    assert_one_line_error(refused, f"--data {data}", f"vocabulary has {vocab} tokens", f"more than the {model}",
                          "--workload llama --size tiny")
    assert not out.exists()  # refused before any run folder (or worker)
    assert_one_line_error(run_main("input-bench", "--workload", "llama", "--size", "tiny", str(data)),
                          f"--data {data}", f"vocabulary has {vocab} tokens", f"more than the {model}")
