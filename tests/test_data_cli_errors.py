"""Bad input to ``trainbench data ...``: one line naming the file and the problem, exit 2, nothing written."""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, assert_one_line_error, run_cli, run_main
from trainbench.data.synth_tree import SynthOptions, synth


@pytest.fixture
def data(tmp_path: Path) -> Path:
    root = tmp_path / "imagenet"
    synth(SynthOptions(root, classes=2, train_per_class=2, val_per_class=1, size=(32, 24), workers=1))
    return root


def _refused(data: Path, *fragments: str) -> None:
    assert_one_line_error(run_cli("data", "convert", str(data)), *fragments)
    assert not (data / "TFRecords").exists()


def test_missing_train_folder(data: Path) -> None:
    (data / "train").rename(data / "training")
    _refused(data, str(data / "train"), "missing")


def test_a_synset_folder_without_images(data: Path) -> None:
    (data / "train" / "n00000009").mkdir()
    _refused(data, str(data / "train" / "n00000009"), "synset folder without files")


def test_an_unsorted_validation_folder_points_to_valprep(data: Path) -> None:
    (data / "val" / "ILSVRC2012_val_00000099.JPEG").write_bytes(b"")
    _refused(data, str(data / "val"), "1 files are not in synset folders", "valprep")


def test_a_validation_synset_unknown_to_train(data: Path) -> None:
    (data / "val" / "n00000001").rename(data / "val" / "n07777777")
    _refused(data, str(data / "val" / "n07777777"), "no folder in train/")


def test_a_missing_data_folder(tmp_path: Path) -> None:
    assert_one_line_error(run_main("data", "convert", str(tmp_path / "nowhere")), str(tmp_path / "nowhere"),
                          "no such folder")


def test_an_unreadable_synset_names_file(data: Path) -> None:
    result = run_main("data", "convert", str(data), "--synset-names", str(data / "names.txt"))
    assert_one_line_error(result, str(data / "names.txt"), "cannot read")


@pytest.mark.parametrize(("args", "fragments"), [
    (["convert", "DATA", "--train-shards", "0"], ["--train-shards", "from 1 to 99999", "got 0"]),
    (["convert", "DATA", "--workers", "two"], ["--workers", "not a whole number", "'two'"]),
    (["convert"], ["required", "DATA_DIR"]),
    (["valprep", "DATA"], ["one of the arguments --solution --ground-truth is required"]),
    (["valprep", "DATA", "--solution", "DATA/none.csv"], ["none.csv", "cannot be read"]),
    (["valprep", "DATA", "--solution", "DATA/LOC_synset_mapping.txt"], ["not a LOC_val_solution.csv file"]),
    (["synth", "--output", "DATA", "--classes", "1", "--train-per-class", "1"], ["train: already exists"]),
    (["synth", "--output", "DATA/new", "--classes", "1", "--train-per-class", "1", "--size", "10x10"],
     ["WIDTHxHEIGHT"]),
    (["verify", "DATA/missing"], ["missing", "no such folder"]),
    ([], ["required", "{convert,valprep,verify,synth,text,translate,synth-text,coco,synth-coco}"]),
])
def test_bad_options_are_one_line(data: Path, args: list[str], fragments: list[str]) -> None:
    args = [arg.replace("DATA", str(data)) for arg in args]
    assert_one_line_error(run_main("data", *args), *fragments)
    assert not (data / "TFRecords").exists() and not (data / "new").exists()


def test_the_wrapper_script_passes_its_arguments_on(tmp_path: Path) -> None:
    result = subprocess.run(["bash", "dataset_util/convert_imagenet.sh", str(tmp_path / "nowhere")], cwd=REPO,
                            capture_output=True, text=True)
    assert_one_line_error(result, str(tmp_path / "nowhere"), "no such folder")


def test_synth_onto_a_full_disk_is_one_line(tmp_path: Path) -> None:
    def small_files_only() -> None:  # writes past the limit fail with EFBIG, as a full disk fails them (ENOSPC)
        resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))  # a page for the shared counter, no 500x375 JPEG

    result = subprocess.run([sys.executable, "-m", "trainbench", "data", "synth", "--output", str(tmp_path / "new"),
                             "--classes", "2", "--train-per-class", "2", "--workers", "2"], cwd=REPO,
                            capture_output=True, text=True, timeout=120, preexec_fn=small_files_only)
    assert_one_line_error(result, str(tmp_path / "new" / "train"), "cannot write", "File too large")


def test_synth_refuses_a_dangling_link_where_train_goes(tmp_path: Path) -> None:
    (tmp_path / "train").symlink_to(tmp_path / "gone")
    result = run_main("data", "synth", "--output", str(tmp_path), "--classes", "1", "--train-per-class", "1")
    assert_one_line_error(result, str(tmp_path / "train"), "already exists")


def test_an_output_inside_an_input_folder_is_refused_up_front(data: Path, tmp_path: Path) -> None:
    """Its shards would become the next run's input: refused before anything is read or written. The default
    <data dir>/TFRecords is beside train/ and val/, which are all that is read: it stays allowed."""
    inside = data / "train" / "n00000000" / "records"
    assert_one_line_error(run_main("data", "convert", str(data), "--output", str(inside)),
                          f"--output {inside} is inside the input folder {data / 'train'}")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("One sentence. Another one.\n\nA second document here.\n")
    assert_one_line_error(run_main("data", "text", str(corpus), "--workload", "gpt2", "--output", str(corpus)),
                          f"--output {corpus} is inside the input folder {corpus}")
    assert not inside.exists() and sorted(path.name for path in corpus.iterdir()) == ["a.txt"]
