"""``trainbench data convert`` end to end on a generated tree with every odd case (tiny images, seconds each).

Records must decode to the right sizes and labels, ordinary JPEGs be stored unchanged, odd files be converted or
skipped as specified, and the shards be byte-identical for 1 and 2 workers and after a kill and a rerun.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import REPO, assert_one_line_error, run_cli
from tests.tfrecord_support import flip_byte, plan, shards_in_subprocess
from trainbench.data.bboxes import read_boxes
from trainbench.data.convert import DEFAULT_SEED, ConvertOptions, convert
from trainbench.data.crc32c import ENVIRONMENT, crc32c, crc32c_numpy, mask
from trainbench.data.shards import MANIFEST, shard_files
from trainbench.data.synth_tree import ODD_CASES, SYNSET_NAMES, SynthOptions, synth
from trainbench.data.tfrecord_reader import parse_example, read_records

CLASSES, TRAIN_PER_CLASS, VAL_PER_CLASS = 3, 10, 3
SHARDS = ("--train-shards", "8", "--validation-shards", "2")


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet")
    synth(SynthOptions(root, CLASSES, TRAIN_PER_CLASS, VAL_PER_CLASS, size=(64, 48), odd_cases=True, workers=1))
    return root


@pytest.fixture(scope="module")
def reference(tree: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted in-process conversion with one worker: what every other run must reproduce."""
    output = tmp_path_factory.mktemp("reference")
    convert(ConvertOptions(tree, output=output, train_shards=8, validation_shards=2, workers=1,
                           synset_names=tree / SYNSET_NAMES))
    return output


def _digests(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in shard_files(folder)}


def _records(folder: Path) -> list[dict]:
    return [parse_example(payload) for path in shard_files(folder) for payload in read_records(path)]


def _source(tree: Path, record: dict) -> Path:
    split = "train" if record["image/filename"][0].startswith((b"n", b"odd")) else "val"
    return tree / split / record["image/class/synset"][0].decode() / record["image/filename"][0].decode()


def test_every_usable_file_becomes_a_record_with_its_size_and_label(tree: Path, reference: Path) -> None:
    records = _records(reference)
    usable = sum(outcome != "skipped" for outcome in ODD_CASES.values())
    assert len(records) == CLASSES * (TRAIN_PER_CLASS + VAL_PER_CLASS) + usable
    synsets = sorted(path.name for path in (tree / "train").iterdir())
    for record in records:
        synset = record["image/class/synset"][0].decode()
        assert record["image/class/label"] == [synsets.index(synset) + 1]  # 1..N in sorted synset order
        assert record["image/class/text"] == [f"synthetic class {synsets.index(synset) + 1}".encode()]
        assert (record["image/colorspace"], record["image/channels"], record["image/format"]) == \
            ([b"RGB"], [3], [b"JPEG"])
        decoded = Image.open(io.BytesIO(record["image/encoded"][0]))
        decoded.load()
        assert (decoded.format, decoded.mode) == ("JPEG", "RGB")
        assert decoded.size == (record["image/width"][0], record["image/height"][0])
        assert decoded.size == Image.open(_source(tree, record)).size


def test_ordinary_jpegs_are_stored_unchanged_and_odd_files_converted(tree: Path, reference: Path) -> None:
    by_name = {record["image/filename"][0].decode(): record for record in _records(reference)}
    for name, record in by_name.items():
        original = _source(tree, record).read_bytes()
        stored = record["image/encoded"][0]
        if ODD_CASES.get(name, "stored") == "stored":
            assert stored == original, name  # byte for byte, whatever the file is called
        else:
            assert ODD_CASES[name] == "converted" and stored != original and stored.startswith(b"\xff\xd8"), name
    assert {name for name, outcome in ODD_CASES.items() if outcome != "skipped"} <= set(by_name)


def test_skipped_files_are_listed_with_their_reason(reference: Path) -> None:
    assert b"\r" not in (reference / "skipped.csv").read_bytes()  # LF line ends, as every other file here
    with open(reference / "skipped.csv", newline="") as file:
        rows = {row["file"].rsplit("/", 1)[-1]: row["reason"] for row in csv.DictReader(file)}
    assert rows == {"odd_truncated.JPEG": "truncated JPEG (no end-of-image marker after the image data)",
                    "odd_empty.JPEG": "empty file",
                    "odd_not_an_image.JPEG": "not an image (content not recognised)"}


def test_training_records_carry_the_normalised_annotation_boxes(tree: Path, reference: Path) -> None:
    train = [record for record in _records(reference) if record["image/filename"][0].startswith(b"n")]
    assert train
    for record in train:
        stem = record["image/filename"][0].decode().rsplit(".", 1)[0]
        xml = (tree / "Annotation" / record["image/class/synset"][0].decode() / f"{stem}.xml").read_bytes()
        (box,) = read_boxes(xml, 0, 0)
        got = [record[f"image/object/bbox/{key}"][0] for key in ("xmin", "ymin", "xmax", "ymax")]
        assert got == pytest.approx([box.xmin, box.ymin, box.xmax, box.ymax], abs=1e-6)
        assert record["image/object/bbox/label"] == record["image/class/label"]


def test_the_shards_are_identical_for_one_and_two_workers(tree: Path, reference: Path, tmp_path: Path) -> None:
    result = run_cli("data", "convert", str(tree), "--output", str(tmp_path / "two"), "--workers", "2", *SHARDS,
                     "--synset-names", str(tree / SYNSET_NAMES))
    assert result.returncode == 0, result.stderr
    usable = CLASSES * (TRAIN_PER_CLASS + VAL_PER_CLASS) + 5
    assert result.stdout.startswith(f"converted {usable} images (35 train, 9 validation) into 10 shards")
    assert "4 odd files re-encoded as RGB JPEG; 3 files skipped" in result.stdout
    assert _digests(tmp_path / "two") == _digests(reference)
    assert len(_digests(reference)) == 10
    assert (tmp_path / "two" / "skipped.csv").read_bytes() == (reference / "skipped.csv").read_bytes()


SLOW_CONVERT = textwrap.dedent("""
    import os, sys, time
    import trainbench.data.convert as convert
    prepare = convert.prepare_image
    hold = os.environ.get("SLOW_CONVERT_HOLD")  # a file: while it exists, the images after the 10th wait for it
    done = [0]
    def slow(data):
        time.sleep(0.1)  # slow enough to be killed mid-way: ~5 images a shard
        done[0] += 1
        while hold and done[0] > 10 and os.path.exists(hold):
            time.sleep(0.02)
        return prepare(data)
    convert.prepare_image = slow
    from trainbench.cli.main import main
    sys.exit(main(sys.argv[1:]))
""")


def test_a_run_killed_mid_way_resumes_to_the_same_shards(tree: Path, reference: Path, tmp_path: Path) -> None:
    output, hold = tmp_path / "out", tmp_path / "hold"
    hold.touch()  # each worker stops after its 10th image: a busy machine cannot let the run finish before the kill
    args = ["data", "convert", str(tree), "--output", str(output), *SHARDS, "--synset-names", str(tree / SYNSET_NAMES)]
    process = subprocess.Popen([sys.executable, "-c", SLOW_CONVERT, *args, "--workers", "2"], cwd=REPO,
                               env={**os.environ, "SLOW_CONVERT_HOLD": str(hold)}, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Until the manifest records a finished shard (a shard renamed into place but not yet recorded is redone).
    while not (output / "manifest.json").is_file() or not json.loads((output / "manifest.json").read_text())["shards"]:
        assert process.poll() is None and time.monotonic() < deadline, "the run ended before a shard was done"
        time.sleep(0.01)
    os.killpg(process.pid, signal.SIGKILL)  # the whole group: the parent and its workers, mid-shard
    process.wait()
    assert 0 < len(shard_files(output)) < 10
    result = run_cli(*args, "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert "shards were already done by an earlier run" in result.stdout
    assert _digests(output) == _digests(reference)
    assert not [path for path in output.iterdir() if ".partial-" in path.name]  # the killed run's leftovers


def test_a_finished_conversion_is_not_redone(tree: Path, tmp_path: Path) -> None:
    shutil.copytree(tree, tmp_path / "data", ignore=shutil.ignore_patterns("TFRecords"))
    first = run_cli("data", "convert", str(tmp_path / "data"), *SHARDS)
    assert first.returncode == 0, first.stderr
    output = tmp_path / "data" / "TFRecords"  # the default output folder
    stamps = {path.name: path.stat().st_mtime_ns for path in shard_files(output)}
    again = run_cli("data", "convert", str(tmp_path / "data"), *SHARDS)
    assert again.returncode == 0, again.stderr
    assert "10 of 10 shards were already done" in again.stdout
    assert {path.name: path.stat().st_mtime_ns for path in shard_files(output)} == stamps


def test_a_different_conversion_is_refused_unless_overwrite(tree: Path, reference: Path, tmp_path: Path) -> None:
    output = tmp_path / "out"
    shutil.copytree(reference, output)
    before = _digests(output)
    refused = run_cli("data", "convert", str(tree), "--output", str(output), "--train-shards", "3",
                      "--validation-shards", "1", "--synset-names", str(tree / SYNSET_NAMES))
    assert_one_line_error(refused, str(output), "--overwrite")
    assert _digests(output) == before  # nothing lost
    replaced = run_cli("data", "convert", str(tree), "--output", str(output), "--train-shards", "3",
                       "--validation-shards", "1", "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert sorted(_digests(output)) == ["train-00000-of-00003", "train-00001-of-00003", "train-00002-of-00003",
                                        "validation-00000-of-00001"]


def test_a_broken_annotation_keeps_the_image_without_boxes(tree: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    shutil.copytree(tree, data)
    broken = data / "Annotation" / "n00000002" / "n00000002_3.xml"
    broken.write_text("<annotation><object>")
    summary = convert(ConvertOptions(data, train_shards=2, validation_shards=1, workers=1))
    (record,) = [r for r in _records(summary.output) if r["image/filename"] == [b"n00000002_3.JPEG"]]
    assert record["image/object/bbox/xmin"] == [] and record["image/object/bbox/label"] == []
    assert "Annotation/n00000002/n00000002_3.xml,\"bounding boxes ignored, image kept: not well-formed XML" in \
        (summary.output / "skipped.csv").read_text()


# Converts a tree as another user: root reads every file whatever its mode, so the test drops to an unprivileged
# uid. The drop happens after the imports (and a first conversion as root that loads whatever the converter imports
# lazily): the interpreter may live where that user cannot read (/root/.pyenv here).
CONVERT_AS = textwrap.dedent("""
    import os, sys
    from pathlib import Path
    from trainbench.data.convert import DEFAULT_SEED, ConvertOptions, convert

    data, warm_up, output, uid, gid = sys.argv[1:]
    if int(uid) >= 0:
        convert(ConvertOptions(Path(data), output=Path(warm_up), train_shards=2, validation_shards=1, workers=1))
        os.setgroups([])
        os.setgid(int(gid))
        os.setuid(int(uid))
    convert(ConvertOptions(Path(data), output=Path(output), train_shards=2, validation_shards=1, workers=1))
""")


def _unprivileged() -> tuple[int, int]:
    """The uid and gid to convert as: ``nobody`` for root (skip without one), -1 (no change) for anyone else."""
    if os.geteuid() != 0:
        return -1, -1
    import pwd

    try:
        user = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("running as root and no user 'nobody' to drop to")
    return user.pw_uid, user.pw_gid


def test_an_unreadable_file_is_skipped_with_the_reason(tree: Path) -> None:
    uid, gid = _unprivileged()
    with tempfile.TemporaryDirectory(prefix="unreadable_") as folder:  # not under pytest's root-only folder
        base = Path(folder)
        base.chmod(0o755)
        data, output = base / "data", base / "output"
        shutil.copytree(tree, data)
        for path in [data, *data.rglob("*")]:
            path.chmod(0o755 if path.is_dir() else 0o644)
        (data / "train" / "n00000003" / "n00000003_1.JPEG").chmod(0)
        output.mkdir()
        if uid >= 0:
            os.chown(output, uid, gid)
        result = subprocess.run([sys.executable, "-c", CONVERT_AS, str(data), str(base / "warm_up"), str(output),
                                 str(uid), str(gid)], cwd=REPO, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, result.stderr[-3000:]
        skipped = (output / "skipped.csv").read_text()
        converted = len(_records(output))
    assert "n00000003_1.JPEG,cannot read (Permission denied)" in skipped
    usable = sum(outcome != "skipped" for outcome in ODD_CASES.values())
    assert converted == CLASSES * (TRAIN_PER_CLASS + VAL_PER_CLASS) + usable - 1  # only that file is missing


TENSORFLOW_READ = textwrap.dedent("""
    import sys
    import tensorflow as tf
    scalar = tf.io.FixedLenFeature([], tf.int64)
    spec = {"image/encoded": tf.io.FixedLenFeature([], tf.string), "image/height": scalar, "image/width": scalar,
            "image/class/label": scalar, "image/object/bbox/xmin": tf.io.VarLenFeature(tf.float32)}
    count = 0
    for record in tf.data.TFRecordDataset(sys.argv[2:]):
        example = tf.io.parse_single_example(record, spec)
        image = tf.io.decode_jpeg(example["image/encoded"], channels=3)
        assert image.shape[:2] == (example["image/height"], example["image/width"]), image.shape
        assert 1 <= example["image/class/label"] <= 3
        count += 1
    print(count)
    try:  # TensorFlow's reader checks the payload CRC too: a flipped payload byte must be refused
        for record in tf.data.TFRecordDataset(sys.argv[1]):
            pass
    except tf.errors.DataLossError as error:
        print("refused:", str(error).splitlines()[0])
""")


@pytest.mark.slow
def test_tensorflow_reads_and_decodes_every_record(reference: Path, tmp_path: Path) -> None:
    """TensorFlow's own reader accepts every CRC-32C the converter wrote (the C library's: see the next test for
    the numpy fallback) and refuses a record whose payload no longer matches its checksum."""
    pytest.importorskip("tensorflow")
    files = [str(path) for path in shard_files(reference)]
    corrupt = tmp_path / "train.corrupt"
    shutil.copy(files[0], corrupt)
    flip_byte(corrupt, 100)  # inside the first record's payload (its header is 12 bytes)
    command = [sys.executable, "-c", TENSORFLOW_READ, str(corrupt), *files]
    result = subprocess.run(command, capture_output=True, text=True,
                            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": ""}, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    count, refusal = result.stdout.strip().splitlines()[-2:]
    assert int(count) == len(_records(reference))
    assert refusal.startswith("refused:") and "corrupted record" in refusal, refusal


@pytest.mark.slow
def test_the_numpy_fallback_writes_the_same_checksums(tree: Path, reference: Path, tmp_path: Path) -> None:
    """The reference (read by TensorFlow above) has the C library's checksums: the fallback's shards are the same
    bytes, so TensorFlow accepts them too."""
    result = run_cli("data", "convert", str(tree), "--output", str(tmp_path / "numpy"), "--workers", "1", *SHARDS,
                     "--synset-names", str(tree / SYNSET_NAMES), env={ENVIRONMENT: "numpy"})
    assert result.returncode == 0, result.stderr
    assert _digests(tmp_path / "numpy") == _digests(reference)


@pytest.mark.slow
def test_the_checksums_tensorflow_wrote_are_those_of_both_implementations(tmp_path: Path) -> None:
    """Both implementations against TensorFlow's writer: every length and payload checksum of its shards."""
    pytest.importorskip("tensorflow")
    shards_in_subprocess(tmp_path)
    checked = 0
    for path in sorted(tmp_path.glob("*-of-*")):
        for length, length_crc, payload, payload_crc in _framed(path.read_bytes()):
            for crc in (crc32c, crc32c_numpy):
                assert (mask(crc(length)), mask(crc(payload))) == (length_crc, payload_crc), (path.name, crc)
            checked += 1
    assert checked == len(plan())


def _framed(data: bytes) -> Iterator[tuple[bytes, int, bytes, int]]:
    """Each record's 8 length bytes, their stored masked CRC, the payload and its stored masked CRC."""
    offset = 0
    while offset < len(data):
        length, length_crc = struct.unpack_from("<QI", data, offset)
        payload = data[offset + 12:offset + 12 + length]
        (payload_crc,) = struct.unpack_from("<I", data, offset + 12 + length)
        yield data[offset:offset + 8], length_crc, payload, payload_crc
        offset += 12 + length + 4


def test_the_manifest_lists_every_shard_with_its_count_and_digest(reference: Path) -> None:
    manifest = json.loads((reference / MANIFEST).read_text())
    assert manifest["num_classes"] == CLASSES and manifest["synsets"] == ["n00000001", "n00000002", "n00000003"]
    digests = _digests(reference)
    assert {name: entry["sha256"] for name, entry in manifest["shards"].items()} == digests
    assert sum(entry["records"] for entry in manifest["shards"].values()) == len(_records(reference))


def test_the_manifest_is_byte_for_byte_the_documented_layout(reference: Path) -> None:
    """manifest.json: format, fingerprint, num_classes, label_offset, synsets, seed, shard_counts, then the shards
    sorted by name, each with split, records, bytes, sha256, converted, skipped (JSON, two-space indent)."""
    listed = json.loads((reference / MANIFEST).read_text())
    shards = {}
    for path in sorted(shard_files(reference), key=lambda path: path.name):
        entry = listed["shards"][path.name]
        shards[path.name] = {"split": path.name.split("-")[0], "records": sum(1 for _ in read_records(path)),
                             "bytes": path.stat().st_size, "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
                             "converted": entry["converted"], "skipped": entry["skipped"]}
    expected = {"format": "trainbench-tfrecords/1", "fingerprint": listed["fingerprint"], "num_classes": CLASSES,
                "label_offset": 1, "synsets": ["n00000001", "n00000002", "n00000003"], "seed": DEFAULT_SEED,
                "shard_counts": {"train": 8, "validation": 2}, "shards": shards}
    assert list(shards) == [f"train-{index:05d}-of-00008" for index in range(8)] + \
        [f"validation-{index:05d}-of-00002" for index in range(2)]
    assert (reference / MANIFEST).read_bytes() == (json.dumps(expected, indent=2) + "\n").encode()
    assert sum(entry["converted"] for entry in shards.values()) == sum(
        outcome == "converted" for outcome in ODD_CASES.values())


def test_the_demo_says_how_many_records_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from trainbench.demo import CLASSES as DEMO_CLASSES
    from trainbench.demo import TRAIN_PER_CLASS as DEMO_TRAIN
    from trainbench.demo import VAL_PER_CLASS as DEMO_VAL
    from trainbench.demo import prepare_data

    output = prepare_data(tmp_path)
    records = DEMO_CLASSES * (DEMO_TRAIN + DEMO_VAL) + 5  # five of the eight odd files are usable
    assert len(_records(output)) == records
    assert f"converted {records} images into 3 shards in {output}, 4 of them re-encoded as RGB JPEG; skipped 3 " \
           "files" in capsys.readouterr().out
