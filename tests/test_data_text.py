"""``trainbench data text`` / ``data translate``: real text into the BERT, GPT-2 and Transformer records.

The corpus is ``data synth-text``'s (Python's own docstrings), cut small; the shards are read back by
tf-models-official's own readers (BERT's pre-training data loader, the legacy Transformer's pipeline) and by the
suite's TFRecord reader.
"""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench.data import text_convert, text_records
from trainbench.data.record_schemas import EOS_ID, GPT2_END_OF_TEXT
from trainbench.data.shards import shard_files
from trainbench.data.text_convert import TextOptions, convert_text
from trainbench.data.text_corpus import read_corpus, sentences
from trainbench.data.text_records import BertIds, Instance, bert_instances
from trainbench.data.text_synth import synth_text
from trainbench.data.tfrecord_reader import parse_example, read_records
from trainbench.data.tfrecord_writer import write_shard
from trainbench.data.vocab import from_files

SEQ_LEN, MASKED = 32, 5  # the tiny BERT's sequence; workloads.bert.masked_count(32)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return synth_text(tmp_path_factory.mktemp("text"), documents=80, pairs=200).output


def _options(kind: str, inputs: tuple[Path, ...], output: Path, **extra: object) -> TextOptions:
    settings: dict[str, object] = {"vocab_size": 512, "shards": 3, "workers": 1, **extra}
    if kind != "translation":
        settings.setdefault("seq_len", SEQ_LEN)
    return TextOptions(kind, inputs, output, **settings)  # type: ignore[arg-type]


def _files(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if not path.name.startswith(".")}


def _tokenizer(folder: Path, kind: str) -> Any:  # a tokenizers.Tokenizer
    names = ("vocab.json", "merges.txt") if kind == "gpt2" else ("vocab.txt",)
    return from_files(kind, {name: (folder / name).read_bytes() for name in names}).tokenizer()  # type: ignore[arg-type]


@pytest.mark.slow
def test_tf_models_official_reads_the_bert_and_translation_shards(corpus: Path, tmp_path: Path) -> None:
    import tensorflow as tf
    from official.legacy.transformer import data_pipeline
    from official.nlp.data.pretrain_dataloader import BertPretrainDataConfig, BertPretrainDataLoader

    bert = tmp_path / "bert"
    convert_text(_options("bert", (corpus / "corpus",), bert))
    config = BertPretrainDataConfig(input_path=str(bert / "train-*"), seq_length=SEQ_LEN,
                                    max_predictions_per_seq=MASKED, use_next_sentence_label=True,
                                    global_batch_size=8, is_training=False)
    batches = list(BertPretrainDataLoader(config).load().as_numpy_iterator())
    tokenizer = _tokenizer(bert, "bert")
    streams = [" " + " ".join(str(i) for e in tokenizer.encode_batch(sentences(doc.text), add_special_tokens=False)
                              for i in e.ids) + " " for doc in read_corpus([corpus / "corpus"]).documents]
    mask_id, cls_id, sep_id = (tokenizer.token_to_id(token) for token in ("[MASK]", "[CLS]", "[SEP]"))
    outcomes: Counter[str] = Counter()
    labels = set()
    for batch in batches:
        assert batch["input_word_ids"].shape[1:] == (SEQ_LEN,)
        assert batch["masked_lm_ids"].shape[1:] == batch["masked_lm_weights"].shape[1:] == (MASKED,)
        for row in range(len(batch["input_word_ids"])):
            ids, weights = list(batch["input_word_ids"][row]), batch["masked_lm_weights"][row]
            length = int(batch["input_mask"][row].sum())
            assert ids[0] == cls_id and ids[length - 1] == sep_id and max(ids) < 512 and not any(ids[length:])
            original = list(ids)
            for position, label, weight in zip(batch["masked_lm_positions"][row], batch["masked_lm_ids"][row],
                                               weights, strict=True):
                if weight:
                    kind = "mask" if ids[position] == mask_id else "kept" if ids[position] == label else "random"
                    outcomes[kind] += 1
                    original[position] = label
            middle = original.index(sep_id, 1)
            segment_a = " " + " ".join(map(str, original[1:middle])) + " "
            # with the masked ids put back, segment A is a stretch of a document's tokens: they are the originals
            assert any(segment_a in stream for stream in streams), segment_a
            assert list(batch["input_type_ids"][row][:length]) == [0] * (middle + 1) + [1] * (length - middle - 1)
            labels.add(int(batch["next_sentence_labels"][row][0]))
    assert labels == {0, 1}
    assert outcomes["mask"] > 3 * (outcomes["kept"] + outcomes["random"]) > 0

    translation = tmp_path / "translation"
    parallel = corpus / "parallel"
    convert_text(_options("translation", (parallel / "source.txt", parallel / "target.txt"), translation,
                          max_length=24))
    tokenizer = _tokenizer(translation, "translation")
    lines = zip((parallel / "source.txt").read_text().splitlines(), (parallel / "target.txt").read_text().splitlines(),
                strict=True)
    pairs = {(tuple(tokenizer.encode(src).ids), tuple(tokenizer.encode(tgt).ids)) for src, tgt in lines}
    dataset = data_pipeline._read_and_batch_from_files(str(translation / "train-*"), batch_size=256, max_length=24,
                                                       max_io_parallelism=1, shuffle=False, repeat=1)
    seen = 0
    for inputs, targets in dataset.as_numpy_iterator():
        for source, target in zip(inputs, targets, strict=True):
            source, target = [int(i) for i in source if i], [int(i) for i in target if i]  # 0: padding
            assert source[-1] == target[-1] == EOS_ID
            assert (tuple(source[:-1]), tuple(target[:-1])) in pairs
            seen += 1
    manifest_records = sum(1 for path in shard_files(translation) for _ in read_records(path))
    assert seen == manifest_records > 0
    assert tf.size  # TensorFlow was the reader


def test_gpt2_blocks_are_documents_joined_by_end_of_text(corpus: Path, tmp_path: Path) -> None:
    convert_text(_options("gpt2", (corpus / "corpus",), tmp_path, shards=1))
    tokenizer = _tokenizer(tmp_path, "gpt2")
    from tokenizers import decoders

    tokenizer.decoder = decoders.ByteLevel()
    blocks = [parse_example(payload)["input_ids"] for payload in read_records(tmp_path / "train-00000-of-00001")]
    assert blocks and all(len(block) == SEQ_LEN + 1 and max(block) < 512 for block in blocks)  # type: ignore[type-var]
    text = tokenizer.decode([i for block in blocks for i in block], skip_special_tokens=False)
    documents = {doc.text for doc in read_corpus([corpus / "corpus"]).documents}
    whole = text.split(GPT2_END_OF_TEXT)[1:-1]  # the first and last pieces may be cut by the blocks
    assert len(whole) > 10 and all(piece in documents for piece in whole)


def test_the_same_bytes_with_one_or_two_workers_and_after_a_rerun(corpus: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    inputs = (corpus / "corpus",)
    convert_text(_options("bert", inputs, tmp_path / "one"))
    convert_text(_options("bert", inputs, tmp_path / "two", workers=2))
    assert _files(tmp_path / "one") == _files(tmp_path / "two")

    real, calls = text_convert.convert_text_shard, []

    def stop_after_the_first(task: object) -> object:
        calls.append(task)
        if len(calls) > 1:
            raise KeyboardInterrupt  # Ctrl-C after the first shard
        return real(task)  # type: ignore[arg-type]

    monkeypatch.setattr(text_convert, "convert_text_shard", stop_after_the_first)
    with pytest.raises(KeyboardInterrupt):
        convert_text(_options("bert", inputs, tmp_path / "rerun"))
    monkeypatch.undo()
    assert len(shard_files(tmp_path / "rerun")) == 1
    summary = convert_text(_options("bert", inputs, tmp_path / "rerun"))
    assert summary.resumed == 1 and summary.shards == 3
    assert _files(tmp_path / "rerun") == _files(tmp_path / "one")


def test_a_non_utf8_file_is_skipped_and_the_rest_converts(corpus: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "good.txt").write_text("\n\n".join(path.read_text() for path in sorted((corpus / "corpus").iterdir())))
    (inputs / "latin1.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    (inputs / "empty.txt").write_bytes(b"\n\n")
    result = run_cli("data", "text", str(inputs), "--workload", "bert", "--output", str(tmp_path / "out"),
                     "--vocab-size", "512", "--seq-len", "32", "--shards", "2")
    assert result.returncode == 0, result.stderr
    assert "2 files skipped" in result.stdout and "bert records in 2 shards" in result.stdout
    skipped = (tmp_path / "out" / "skipped.csv").read_text().splitlines()
    assert skipped[0] == "file,reason" and len(skipped) == 3
    assert f"{inputs / 'latin1.txt'},not UTF-8 text (byte 3" in skipped[2]
    assert skipped[1].startswith(f"{inputs / 'empty.txt'},no text")
    verified = run_cli("data", "verify", str(tmp_path / "out"))
    assert verified.returncode == 0 and "masked positions inside the sequence" in verified.stdout, verified.stderr


def test_input_wrong_as_a_whole_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("")
    (tmp_path / "b.txt").write_text("\n  \n")
    assert_one_line_error(run_main("data", "text", str(tmp_path / "a.txt"), str(tmp_path / "b.txt"), "--workload",
                                   "gpt2", "--output", str(tmp_path / "out")), "no text to convert in 2 input files")
    (tmp_path / "src").write_text("one\ntwo\n")
    (tmp_path / "tgt").write_text("eins\n")
    assert_one_line_error(run_main("data", "translate", str(tmp_path / "src"), str(tmp_path / "tgt"), "--output",
                                   str(tmp_path / "out")), "has 2 lines", "1", "one target line per source line")


def test_a_translation_that_keeps_no_pair_is_refused_and_leaves_no_empty_shards(tmp_path: Path) -> None:
    """Every pair longer than --max-length: one line (exit 2) saying so, no shards or manifest that `data verify`
    could call ok; the vocabulary stays for --vocab. Empty shards left by an older trainbench fail `data verify`."""
    words = " ".join(f"word{index}" for index in range(40))
    (tmp_path / "src").write_text("".join(f"{words} {line}\n" for line in range(6)))
    (tmp_path / "tgt").write_text("".join(f"{words} {line}\n" for line in range(6)))
    out = tmp_path / "out"
    refused = run_main("data", "translate", str(tmp_path / "src"), str(tmp_path / "tgt"), "--output", str(out),
                       "--max-length", "8", "--shards", "2", "--vocab-size", "300", "--workers", "1")
    assert_one_line_error(refused, f"{tmp_path / 'src'}: none of its 6 sentence pairs made a record",
                          "all 6 were longer than --max-length 8", f"no shards kept in {out}")
    assert not shard_files(out) and not (out / "manifest.json").exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    write_shard(empty / "train-00000-of-00001", [])
    verified = run_main("data", "verify", str(empty))
    assert verified.returncode != 0 and f"{empty}: its 1 shards hold no record" in verified.stdout + verified.stderr


def test_masking_is_15_percent_80_10_10_and_follows_the_seed() -> None:
    ids = BertIds(cls=2, sep=3, mask=4, words=range(5, 500))
    words = random.Random(0)
    documents = [[[words.randrange(5, 500) for _ in range(9)] for _ in range(20)] for _ in range(100)]

    def instances(seed: int) -> list[Instance]:
        return bert_instances(documents, 128, 20, ids, random.Random(seed))

    first = instances(1)
    assert [i.tokens for i in first] == [i.tokens for i in instances(1)]
    assert [i.tokens for i in first] != [i.tokens for i in instances(2)]
    tokens = sum(len(i.tokens) for i in first)
    predicted = [(i.tokens[p], label) for i in first for p, label in zip(i.positions, i.labels, strict=True)]
    assert 0.14 < len(predicted) / tokens < 0.16
    assert all(len(i.positions) <= 20 and 3 not in (i.tokens[p] for p in i.positions) for i in first)
    masked = sum(token == 4 for token, _ in predicted) / len(predicted)
    kept = sum(token == label for token, label in predicted) / len(predicted)
    assert 0.77 < masked < 0.83 and 0.08 < kept < 0.12  # the rest (about 10 %) a random word
    # half the pairs, and more: a chunk of one sentence (often the sentences a random B left unused) always is
    assert 0.45 < sum(i.random_next for i in first) / len(first) < 0.7


def _truncated_one_at_a_time(a: list[int], b: list[int], most: int, rng: random.Random) -> None:
    """create_pretraining_data.py's truncate_seq_pair, as written there (quadratic on a huge sentence)."""
    while len(a) + len(b) > most:
        longer = a if len(a) > len(b) else b
        if rng.random() < 0.5:
            del longer[0]
        else:
            longer.pop()


def test_truncation_cuts_once_what_the_reference_drops_one_at_a_time() -> None:
    """The same tokens kept, from the same random draws, as BERT's reference (a 10 MB line with no sentence end
    converts in seconds: each token deleted from a list's front made it run for many minutes)."""
    draw = random.Random(7)
    for _ in range(500):
        a, b = list(range(draw.randint(0, 80))), list(range(1000, 1000 + draw.randint(0, 80)))
        most, seed = draw.randint(1, 100), draw.random()
        expected_a, expected_b = a[:], b[:]
        _truncated_one_at_a_time(expected_a, expected_b, most, random.Random(seed))
        text_records._truncate_pair(a, b, most, random.Random(seed))
        assert (a, b) == (expected_a, expected_b)
