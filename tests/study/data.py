"""``trainbench data text|translate|convert|verify`` and record folders read with ``--data`` (issue 42's converter
cases): an output folder inside the input folder is refused before anything is read or written; a conversion that
keeps nothing is refused in one line and leaves no shard; ``--seq-len`` is bounded by the workload's positions;
shards with no record fail ``data verify``; records without their manifest are named so, not called ImageNet's.

The corpora are tiny and written by the suite's own writers: ``data synth-text``'s ``synth_text`` (4 documents,
12 sentence pairs), ``data synth``'s ``synth`` (2 classes of 2 images), the TFRecord writer and
``tests/record_fixtures``' records. The contents the commands write are checked by ``tests/test_data_text.py``,
``tests/test_data_cli_errors.py`` and ``tests/test_workload_results.py``; here each command's promise.
"""

from __future__ import annotations

from pathlib import Path

from tests.record_fixtures import write_records
from tests.study import StudyCase
from trainbench.data.synth_tree import SynthOptions, synth
from trainbench.data.text_synth import synth_text
from trainbench.data.tfrecord_writer import write_shard

PAIRS = 12  # sentence pairs of the synthetic parallel corpus, each side 3 words or more (4 tokens or more with <EOS>)
TINY_BERT = ("throughput", "--workload", "bert", "--size", "tiny", "--device", "cpu", "--warmup", "0", "--steps", "1",
             "--batch-sizes", "2", "--output", "{w}/out")


def build(world: Path) -> None:
    synth_text(world / "text", documents=4, pairs=PAIRS)  # text/corpus/*.txt, text/parallel/{source,target}.txt
    synth(SynthOptions(world / "imagenet", classes=2, train_per_class=2, val_per_class=1, size=(32, 24), workers=1))
    (world / "empty_shards").mkdir()
    write_shard(world / "empty_shards" / "train-00000-of-00001", [])  # as an older trainbench left a 0-pair run
    (write_records(world / "bert_no_manifest", "bert", records=2, shards=1) / "manifest.json").unlink()


CORPUS = "{w}/text/corpus"
TEXT = ("data", "text", CORPUS, "--vocab-size", "300", "--workers", "1")

CASES: list[StudyCase] = [
    # an output folder inside a folder that is read: its shards would become the next run's input
    StudyCase("text output is the input folder", (*TEXT, "--workload", "gpt2", "--output", CORPUS),
              (f"--output {CORPUS} is inside the input folder {CORPUS}",), kind="overwrite"),
    StudyCase("text output inside the input folder", (*TEXT, "--workload", "bert", "--output", f"{CORPUS}/records"),
              (f"--output {CORPUS}/records is inside the input folder {CORPUS}",), kind="overwrite"),
    StudyCase("convert output inside train", ("data", "convert", "{w}/imagenet", "--output",
                                              "{w}/imagenet/train/n00000000/records"),
              ("--output {w}/imagenet/train/n00000000/records is inside the input folder {w}/imagenet/train",),
              kind="overwrite"),
    # a length no run of the workload reads: bert's positions are 512
    StudyCase("text bert seq_len beyond its positions", (*TEXT, "--workload", "bert", "--seq-len", "1000", "--output",
                                                         "{w}/bert_1000"),
              ("--seq-len 1000", "--workload bert reads sequences of 8 to 512 tokens"), kind="exit-code"),
    # every pair longer than --max-length: refused (exit 2), no empty shards that `data verify` could call ok; the
    # vocabulary, the lock and skipped.csv stay (writes), never a shard or a manifest
    StudyCase("translate keeps no pair", ("data", "translate", "{w}/text/parallel/source.txt",
                                          "{w}/text/parallel/target.txt", "--output", "{w}/translated",
                                          "--max-length", "2", "--shards", "2", "--vocab-size", "300",
                                          "--workers", "1"),
              (f"{{w}}/text/parallel/source.txt: none of its {PAIRS} sentence pairs made a record",
               f"all {PAIRS} were longer than --max-length 2", "no shards kept in {w}/translated"),
              writes=True, kind="exit-code"),
    StudyCase("verify shards holding no record", ("data", "verify", "{w}/empty_shards"),
              ("{w}/empty_shards: its 1 shards hold no record",), kind="silent-wrong"),
    # records without their manifest: named so, not read as ImageNet's, refused before any worker or folder
    StudyCase("bert records without their manifest", (*TINY_BERT, "--data", "{w}/bert_no_manifest"),
              ("--data {w}/bert_no_manifest holds TFRecords without a manifest.json",
               "read as ImageNet records"), kind="unclear-error"),
    StudyCase("bert records read as imagenet", ("throughput", "--workload", "resnet50", "--size", "tiny", "--device",
                                                "cpu", "--data", "{w}/bert_no_manifest", "--output", "{w}/out"),
              ("--data {w}/bert_no_manifest: its records name 0 ImageNet classes",
               "a classifier needs 2 or more"), kind="unclear-error"),
]
