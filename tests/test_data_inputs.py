"""Odd entries in an ImageNet tree, in train/ and val/ alike: symbolic links (to another class, dangling, in a loop),
folders inside class folders, pipes, loose files, non-UTF-8 file names, a huge non-image. Each is converted, listed
in skipped.csv with its reason, or refused with one line; never a traceback, never a silent duplicate or loss.
"""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli
from trainbench.data.shards import shard_files
from trainbench.data.synth_tree import SynthOptions, synth
from trainbench.data.tfrecord_reader import parse_example, read_records

SHARDS = ("--train-shards", "2", "--validation-shards", "1")
RECORDS = 3 * 3 + 3 * 2  # the fixture's train and val images


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("imagenet")
    synth(SynthOptions(root, classes=3, train_per_class=3, val_per_class=2, size=(32, 24), workers=1))
    return root


@pytest.fixture
def data(pristine: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(pristine, tmp_path / "imagenet", symlinks=True))


def _convert(data: Path) -> subprocess.CompletedProcess[str]:
    result = run_cli("data", "convert", str(data), *SHARDS, "--workers", "2")
    assert result.returncode == 0 and not result.stderr, result.stderr
    return result


def _skipped(data: Path) -> dict[str, str]:
    with open(data / "TFRecords" / "skipped.csv", newline="", encoding="utf-8") as file:
        return {row["file"]: row["reason"] for row in csv.DictReader(file)}


def _filenames(data: Path) -> list[bytes]:
    return [parse_example(payload)["image/filename"][0] for path in shard_files(data / "TFRecords")
            for payload in read_records(path)]


@pytest.mark.parametrize(("link", "target"), [
    ("train/n00000009", "n00000001"),  # an extra class with the same images under a new label
    ("val/n00000003", "n00000001"),  # validation images under two labels
    ("val/n00000002", "../train/n00000002"),  # training images used for validation
])
def test_a_class_folder_that_is_another_one_through_a_link_is_refused(data: Path, link: str, target: str) -> None:
    if (data / link).exists():
        shutil.rmtree(data / link)
    (data / link).symlink_to(target)
    resolved = (data / link).resolve().relative_to(data.resolve())
    assert_one_line_error(run_cli("data", "convert", str(data), *SHARDS), str(data / link), str(data / resolved),
                          "the same folder", "converted twice")
    assert not (data / "TFRecords").exists()


def test_a_class_folder_linked_from_outside_the_tree_is_a_class(data: Path, tmp_path: Path) -> None:
    shutil.move(data / "train" / "n00000003", tmp_path / "elsewhere")
    (data / "train" / "n00000003").symlink_to(tmp_path / "elsewhere")
    assert "(9 train, 6 validation)" in _convert(data).stdout


@pytest.mark.parametrize("split", ["train", "val"])
def test_entries_that_are_not_images_in_class_folders_are_listed(data: Path, split: str) -> None:
    folder = data / split / "n00000002"
    (folder / "dangling.JPEG").symlink_to("nowhere.JPEG")
    (folder / "loop.JPEG").symlink_to("loop.JPEG")
    (folder / "nested").mkdir()
    shutil.copy(next(folder.glob("*.JPEG")), folder / "nested" / "hidden_from_view.JPEG")
    os.mkfifo(folder / "pipe")  # reading it would wait for ever
    (data / split / "n00000007").symlink_to("gone")  # a dangling class folder
    (data / split / "loop").symlink_to("loop")
    prefix = f"{split}/n00000002"
    expected = {
        f"{prefix}/dangling.JPEG": "dangling symbolic link (its target does not exist)",
        f"{prefix}/loop.JPEG": "symbolic link loop",
        f"{prefix}/nested": f"folder inside a synset folder: not searched (images belong directly in {prefix}/)",
        f"{prefix}/pipe": "not a regular file (a device, pipe or socket)",
        f"{split}/n00000007": "dangling symbolic link (its target does not exist)",
        f"{split}/loop": "symbolic link loop",
    }
    result = _convert(data)
    assert "(9 train, 6 validation)" in result.stdout and "6 files skipped" in result.stdout
    assert _skipped(data) == expected


def test_a_file_loose_in_train_is_listed(data: Path) -> None:
    (data / "train" / "n01440764.tar").write_bytes(b"an archive left unpacked")
    _convert(data)
    assert _skipped(data) == {"train/n01440764.tar": "not in a synset folder"}


def test_a_class_folder_holding_only_a_subfolder_is_refused(data: Path) -> None:
    folder = data / "train" / "n00000002"
    (folder / "n00000002").mkdir()  # a common unpacking mistake: train/n02/n02/*.JPEG
    for image in folder.glob("*.JPEG"):
        image.rename(folder / "n00000002" / image.name)
    assert_one_line_error(run_cli("data", "convert", str(data), *SHARDS), str(folder), "synset folder without files",
                          "subfolders are not searched")


@pytest.mark.slow
def test_non_utf8_names_are_converted_as_the_bytes_they_are(data: Path) -> None:
    raw = os.fsencode(data)
    for split in (b"train", b"val"):
        folder = raw + b"/" + split + b"/n00000001/"
        image = sorted(name for name in os.listdir(folder) if name.endswith(b".JPEG"))[0]
        os.rename(folder + image, folder + b"caf\xe9_\xff.JPEG")  # Latin-1 and a byte no encoding has
    os.rename(raw + b"/train/n00000003", raw + b"/train/n\xff3")  # a synset folder too, in both splits
    os.rename(raw + b"/val/n00000003", raw + b"/val/n\xff3")
    os.mkdir(raw + b"/train/n00000002/sub\xfe")
    result = _convert(data)
    assert "(9 train, 6 validation)" in result.stdout
    assert _filenames(data).count(b"caf\xe9_\xff.JPEG") == 2
    assert "train/n00000002/sub\\xfe" in _skipped(data)  # shown as \xNN in the UTF-8 csv
    verified = run_cli("data", "verify", str(data / "TFRecords"))
    assert verified.returncode == 0 and "labels 1..3" in verified.stdout, verified.stderr
    again = run_cli("data", "convert", str(data), *SHARDS)  # the plan's fingerprint holds the names
    assert again.returncode == 0 and "3 of 3 shards were already done" in again.stdout, again.stderr


# The peak memory of this process image: VmHWM (ru_maxrss would keep the peak of the forked pytest before exec).
PEAK_MEMORY = textwrap.dedent("""
    import re, sys
    from pathlib import Path
    from trainbench.cli.main import main
    code = main(sys.argv[1:])
    print(int(re.search(r"VmHWM:\\s*(\\d+) kB", Path("/proc/self/status").read_text()).group(1)) * 1024,
          file=sys.stderr)
    sys.exit(code)
""")


def test_a_huge_non_image_is_judged_by_its_head(data: Path) -> None:
    huge = data / "train" / "n00000002" / "disk_image.JPEG"
    with open(huge, "wb") as file:
        file.truncate(1 << 30)  # 1 GiB, sparse: no disk space, but reading it all would need 1 GiB of memory
    result = subprocess.run([sys.executable, "-c", PEAK_MEMORY, "data", "convert", str(data), *SHARDS, "--workers",
                             "1"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert int(result.stderr.split()[-1]) < 400 * 2**20
    assert _skipped(data) == {"train/n00000002/disk_image.JPEG": "not an image (content not recognised)"}


def test_a_dangling_val_link_is_refused_not_taken_for_no_validation_set(data: Path) -> None:
    shutil.rmtree(data / "val")
    (data / "val").symlink_to("/nonexistent/val")
    assert_one_line_error(run_cli("data", "convert", str(data), *SHARDS), str(data / "val"), "not a folder",
                          "dangling symbolic link")
