"""Real input through the command line: ``throughput --data``, ``train --data``, ``input-bench``, bad folders."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from tests.tfrecord_support import CLASSES, IMAGE_SIZE, flip_byte, shard_name, write_image_folder, write_shards

TINY = ["--device", "cpu", "--image-size", str(IMAGE_SIZE)]


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Written by TensorFlow in this process (torch was imported first, by tests/conftest.py: the safe order), which
    test_input_bench[tf] imports TensorFlow into anyway; a process of its own would import it once more."""
    folder = tmp_path_factory.getbasetemp() / "cli-shards"
    if not any(folder.glob("train-*")):
        write_shards(folder)
    return folder


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_throughput_on_real_data_reports_the_input_pipeline(tmp_path: Path, shards: Path, framework: str) -> None:
    """The sweep in this process (its worker is a real one, reading the shards); the CLI's own process is held by
    tests/test_throughput_e2e.py."""
    result = run_main("throughput", "--framework", framework, "--data", str(shards), "--batch-sizes", "2", *TINY,
                      "--warmup", "1", "--steps", "2", "--output", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(last_line(result.stdout))
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["data"] == str(shards.resolve()) and summary["model"]["num_classes"] == CLASSES  # from the data
    [entry] = summary["results"]
    assert entry["status"] == "ok", entry["error"]
    assert entry["input_samples_per_sec"] > 0
    assert entry["input_bound"] is (entry["input_samples_per_sec"] < 1.1 * entry["samples_per_sec"])
    with open(run_dir / "summary.csv", newline="") as rows:
        [row] = list(csv.DictReader(rows))
    assert float(row["input_samples_per_sec"]) == pytest.approx(entry["input_samples_per_sec"])


# Synthetic input leaves the input fields empty: tests/test_throughput_e2e.py's complete run checks it.


@pytest.mark.slow
def test_train_one_epoch_on_shards(tmp_path: Path, shards: Path) -> None:
    """In this process (training starts no worker); the train command's own process: tests/test_train_e2e.py."""
    result = run_main("train", "--framework", "torch", "--data", str(shards), "--epochs", "1", "--batch-size", "4",
                     *TINY, "--warmup-epochs", "0", "--log-every", "2", "--output", str(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = Path(last_line(result.stdout))
    config = json.loads((run_dir / "config.json").read_text())
    assert config["data"] == str(shards.resolve()) and config["model"]["num_classes"] == CLASSES
    assert "epoch 1/1 step 4/4 loss" in result.stdout  # 16 training records, batch 4
    [row] = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert row["eval_examples"] == 6 and 0 <= row["eval_top1"] <= row["eval_top5"] <= 1


@pytest.mark.slow
def test_train_stops_with_one_line_on_a_corrupt_shard(tmp_path: Path, shards: Path) -> None:
    folder = tmp_path / "shards"
    shutil.copytree(shards, folder)
    broken = folder / shard_name("train", 1)
    flip_byte(broken, 500)  # inside a payload: the record count (headers only) still works, training does not
    result = run_main("train", "--framework", "torch", "--data", str(folder), "--epochs", "1", "--batch-size", "4",
                      *TINY, "--output", str(tmp_path / "out"))
    assert_one_line_error(result, str(broken), "corrupt record at byte")
    assert list((tmp_path / "out").iterdir())  # the run folder made before training is kept


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["torch", "tf"])
def test_input_bench(shards: Path, framework: str) -> None:
    """In this process (its loader's worker is a real one); the command's own process: the image-folder test below."""
    result = run_main("input-bench", str(shards), "--framework", framework, "--batch-size", "4", "--steps", "3",
                      "--warmup", "1", "--workers", "1", "--image-size", str(IMAGE_SIZE))
    assert result.returncode == 0, result.stdout + result.stderr
    figures = json.loads(last_line(result.stdout))
    assert (figures["framework"], figures["images"], figures["timed_batches"]) == (framework, 12, 3)
    assert figures["images_per_sec"] == pytest.approx(12 / figures["seconds"])
    loader = ", cpu loader" if framework == "torch" else ""
    assert f"input pipeline ({framework}{loader}, 1 workers, batch 4, {IMAGE_SIZE} px)" in result.stdout


@pytest.mark.slow
def test_input_bench_on_an_image_folder_tree(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "tree", evaluation=False)
    result = run_cli("input-bench", str(tmp_path / "tree"), "--batch-size", "2", "--steps", "2", "--warmup", "1",
                     "--workers", "0", "--image-size", str(IMAGE_SIZE))
    assert result.returncode == 0, result.stdout + result.stderr
    assert json.loads(last_line(result.stdout))["images"] == 4


def _empty(folder: Path) -> None:
    folder.mkdir()


def _no_images(folder: Path) -> None:
    (folder / "train" / "n01440764").mkdir(parents=True)
    (folder / "train" / "n01440764" / "notes.txt").write_text("not an image")
    (folder / "train-unfinished.tmp").write_bytes(b"a shard being written")


@pytest.mark.parametrize("make", [_empty, _no_images])
@pytest.mark.parametrize("command", [["throughput"], ["train"], ["input-bench"]])
def test_folders_without_data_are_refused_in_one_line(tmp_path: Path, make, command: list[str]) -> None:
    folder = tmp_path / "data"
    make(folder)
    args = [str(folder)] if command == ["input-bench"] else ["--data", str(folder), "--output", str(tmp_path / "out")]
    result = run_main(*command, *args)  # refused before any worker or training: in this process
    assert_one_line_error(result, str(folder), "neither TFRecord shards")
    assert not (tmp_path / "out").exists()


def test_tensorflow_refuses_an_image_folder_tree(tmp_path: Path) -> None:
    write_image_folder(tmp_path / "tree", per_class=1, evaluation=False)
    result = run_main("throughput", "--framework", "tf", "--data", str(tmp_path / "tree"), "--output",
                      str(tmp_path / "out"))
    assert_one_line_error(result, str(tmp_path / "tree"), "TFRecord shards only", "--framework torch")
