"""``trainbench data valprep``: a flat val/ sorted by LOC_val_solution.csv or by the devkit's ground truth."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli
from trainbench.data.synth_tree import SOLUTION_CSV, SynthOptions, synth


@pytest.fixture
def flat(tmp_path: Path) -> Path:
    synth(SynthOptions(tmp_path, classes=3, train_per_class=1, val_per_class=3, size=(32, 24), flat_val=True,
                       workers=1))
    return tmp_path


def _truth(root: Path) -> dict[str, str]:
    with open(root / SOLUTION_CSV, newline="") as file:
        return {row["ImageId"]: row["PredictionString"].split()[0] for row in csv.DictReader(file)}


def _sorted(val: Path) -> dict[str, str]:
    return {path.stem: path.parent.name for path in val.glob("*/*")}


@pytest.mark.slow
def test_solution_csv_sorts_every_file(flat: Path) -> None:
    assert len(list((flat / "val").iterdir())) == 9
    result = run_cli("data", "valprep", str(flat / "val"), "--solution", str(flat / SOLUTION_CSV))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("moved 9 files into 3 synset folders")
    assert _sorted(flat / "val") == _truth(flat)
    again = run_cli("data", "valprep", str(flat / "val"), "--solution", str(flat / SOLUTION_CSV))
    assert again.returncode == 0 and again.stdout.startswith("moved 0 files"), again.stderr
    converted = run_cli("data", "convert", str(flat), "--train-shards", "1", "--validation-shards", "1")
    assert converted.returncode == 0 and "(3 train, 9 validation)" in converted.stdout, converted.stderr


def test_devkit_ground_truth_with_its_synset_order(flat: Path) -> None:
    truth = _truth(flat)
    order = ["n00000003", "n00000001", "n00000002"]  # the devkit numbers classes in its own order, not sorted
    numbers = [str(order.index(truth[f"ILSVRC2012_val_{k:08d}"]) + 1) for k in range(1, len(truth) + 1)]
    (flat / "ground_truth.txt").write_text("\n".join(numbers) + "\n")
    (flat / "synsets.txt").write_text("".join(f"{synset} class text\n" for synset in order))
    (flat / "val" / "README.txt").write_text("not an image the ground truth names")
    result = run_cli("data", "valprep", str(flat / "val"), "--ground-truth", str(flat / "ground_truth.txt"),
                     "--synset-order", str(flat / "synsets.txt"))
    assert result.returncode == 0, result.stderr
    assert "moved 9 files" in result.stdout and "1 files without ground truth" in result.stdout
    assert _sorted(flat / "val") == truth
    assert (flat / "val" / "README.txt").exists()


def test_ground_truth_of_synsets_needs_no_order(flat: Path) -> None:
    truth = _truth(flat)
    lines = [truth[f"ILSVRC2012_val_{k:08d}"] for k in range(1, len(truth) + 1)]
    (flat / "labels.txt").write_text("\n".join(lines) + "\n")
    result = run_cli("data", "valprep", str(flat / "val"), "--ground-truth", str(flat / "labels.txt"))
    assert result.returncode == 0, result.stderr
    assert _sorted(flat / "val") == truth


def test_class_numbers_without_the_synset_order_are_refused(flat: Path) -> None:
    (flat / "ground_truth.txt").write_text("1\n2\n")
    result = run_cli("data", "valprep", str(flat / "val"), "--ground-truth", str(flat / "ground_truth.txt"))
    assert_one_line_error(result, "ground_truth.txt", "--synset-order")
    assert not [path for path in (flat / "val").iterdir() if path.is_dir()]  # nothing moved


def test_a_solution_naming_none_of_the_files_is_refused(flat: Path) -> None:
    (flat / "other.csv").write_text("ImageId,PredictionString\nILSVRC2012_val_99999999,n00000001 1 2 3 4\n")
    result = run_cli("data", "valprep", str(flat / "val"), "--solution", str(flat / "other.csv"))
    assert_one_line_error(result, str(flat / "val"), "names none of its 9 files")


@pytest.mark.parametrize(("content", "fragments"), [
    (b"ImageId,PredictionString\nILSVRC2012_val_00000001,n\xff 1 2 3 4\n", ["not UTF-8 text", "byte 50: 0xff"]),
    (b"ImageId,PredictionString\nILSVRC2012_val_00000001,../../outside 1 2 3 4\n", [":2:", "is not a synset"]),
])
def test_a_bad_solution_file_is_one_line_and_moves_nothing(flat: Path, content: bytes, fragments: list[str]) -> None:
    (flat / "bad.csv").write_bytes(content)
    result = run_cli("data", "valprep", str(flat / "val"), "--solution", str(flat / "bad.csv"))
    assert_one_line_error(result, str(flat / "bad.csv"), *fragments)
    assert not [path for path in (flat / "val").iterdir() if path.is_dir()]


def test_links_and_odd_names_in_the_folder_are_left_in_place(flat: Path) -> None:
    (flat / "val" / "loop.JPEG").symlink_to("loop.JPEG")
    (flat / "val" / "dangling.JPEG").symlink_to("nowhere")
    (flat / "val" / os.fsdecode(b"caf\xe9.JPEG")).write_bytes(b"")
    result = run_cli("data", "valprep", str(flat / "val"), "--solution", str(flat / SOLUTION_CSV))
    assert result.returncode == 0 and "moved 9 files" in result.stdout, result.stderr
    assert "1 files without ground truth" in result.stdout  # the non-UTF-8 one; links are not files to sort
    assert (flat / "val" / "loop.JPEG").is_symlink() and (flat / "val" / "dangling.JPEG").is_symlink()
