"""``trainbench data verify``: a good folder passes; a corrupt, truncated, missing or lying shard: one line, exit 2."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest
from PIL import Image

from tests.conftest import assert_one_line_error, run_cli
from trainbench.data.convert import ConvertOptions, convert
from trainbench.data.imagefiles import PreparedImage
from trainbench.data.synth_tree import SynthOptions, synth
from trainbench.data.tfrecord_writer import image_example, write_shard


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet")
    synth(SynthOptions(root, classes=2, train_per_class=4, val_per_class=2, size=(64, 48), workers=1))
    return convert(ConvertOptions(root, train_shards=2, validation_shards=1, workers=1)).output


@pytest.fixture
def copy(shards: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(shards, tmp_path / "TFRecords"))


def test_a_good_folder_passes(shards: Path) -> None:
    result = run_cli("data", "verify", str(shards), "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok: 3 shards") and "12 records (8 train, 4 validation)" in result.stdout
    assert "labels 1..2" in result.stdout
    quick = run_cli("data", "verify", str(shards), "--headers-only")
    assert quick.returncode == 0 and "a complete JPEG" in quick.stdout, quick.stderr


def test_a_flipped_byte_is_found(copy: Path) -> None:
    shard = copy / "train-00001-of-00002"
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 0xFF
    shard.write_bytes(bytes(data))
    assert_one_line_error(run_cli("data", "verify", str(copy)), str(shard), "checksum mismatch")


def test_a_truncated_shard_is_found(copy: Path) -> None:
    shard = copy / "validation-00000-of-00001"
    shard.write_bytes(shard.read_bytes()[:-100])
    assert_one_line_error(run_cli("data", "verify", str(copy)), str(shard), "truncated")


def test_a_missing_shard_is_found(copy: Path) -> None:
    (copy / "train-00000-of-00002").unlink()
    assert_one_line_error(run_cli("data", "verify", str(copy)), "train-00000-of-00002", "missing")


def test_a_record_declaring_the_wrong_size_is_found(tmp_path: Path) -> None:
    jpeg = io.BytesIO()
    Image.new("RGB", (40, 30), (10, 200, 30)).save(jpeg, "JPEG")
    liar = PreparedImage(jpeg.getvalue(), height=40, width=30, conversion=None)  # swapped
    write_shard(tmp_path / "train-00000-of-00001", [image_example(liar, "liar.JPEG", 1, "n01", "n01")])
    assert_one_line_error(run_cli("data", "verify", str(tmp_path)), "train-00000-of-00001", "liar.JPEG",
                          "declared 30x40, the JPEG is 40x30")


def test_a_folder_without_shards_is_a_usage_error(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("data", "verify", str(tmp_path)), str(tmp_path), "no TFRecord shards")


def test_a_shard_that_is_not_a_file_is_found(copy: Path) -> None:
    shard = copy / "train-00000-of-00002"
    shard.unlink()
    shard.mkdir()
    assert_one_line_error(run_cli("data", "verify", str(copy)), str(shard), "not a regular file")
