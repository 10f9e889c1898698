"""``trainbench data coco`` end to end on a generated COCO-format set with every odd case (tiny images, seconds).

The shards must be read by tf-models-official's detection decoder with the JSON's boxes, classes, crowd flags,
areas, sizes and ids; be byte-identical for 1 and 2 workers and after an interrupted run is rerun; list each odd
entry in skipped.csv while the rest converts; and a file that is not COCO is one line, exit 2.
"""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli, run_main
from trainbench.data import coco_convert
from trainbench.data.coco_convert import CocoOptions, convert_coco
from trainbench.data.coco_records import check_coco_record
from trainbench.data.coco_synth import (
    ANNOTATIONS,
    COCO_CATEGORIES,
    IMAGE_FOLDER,
    ODD_CASES,
    CocoSynthOptions,
    synth_coco,
)
from trainbench.data.shards import MANIFEST, shard_files
from trainbench.data.tfrecord_reader import parse_example, read_records

IMAGES, SHARDS = 12, 3


@pytest.fixture(scope="module")
def coco_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("coco")
    synth_coco(CocoSynthOptions(root, IMAGES, size=(64, 48), odd_cases=True, workers=1))
    return root


def _options(coco_set: Path, output: Path, workers: int = 1) -> CocoOptions:
    return CocoOptions(coco_set / ANNOTATIONS, coco_set / IMAGE_FOLDER, output, shards=SHARDS, workers=workers)


@pytest.fixture(scope="module")
def reference(coco_set: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An uninterrupted in-process conversion with one worker: what every other run must reproduce."""
    output = tmp_path_factory.mktemp("reference")
    convert_coco(_options(coco_set, output))
    return output


def _digests(folder: Path) -> dict[str, str]:
    return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in shard_files(folder)}


def _payloads(folder: Path) -> list[bytes]:
    return [payload for path in shard_files(folder) for payload in read_records(path)]


def _skipped(folder: Path) -> dict[str, str]:
    with open(folder / "skipped.csv", newline="") as file:
        return {row["file"]: row["reason"] for row in csv.DictReader(file)}


def test_the_synthetic_set_uses_cocos_own_category_ids_and_names() -> None:
    from torchvision.models._meta import _COCO_CATEGORIES  # index = COCO category id, "N/A" for the unused ids

    assert len(COCO_CATEGORIES) == 80 and max(COCO_CATEGORIES) == 90
    assert {index: name for index, name in enumerate(_COCO_CATEGORIES) if index and name != "N/A"} == COCO_CATEGORIES


def test_each_odd_entry_is_listed_and_the_rest_converts(coco_set: Path, reference: Path) -> None:
    records = [parse_example(payload) for payload in _payloads(reference)]
    names = {record["image/filename"][0].decode(): record for record in records}
    assert len(records) == IMAGES + 2  # the PNG and the grayscale JPEG are stored
    assert names["odd_png.png"]["image/format"] == [b"png"]
    assert names["odd_png.png"]["image/encoded"] == [(coco_set / IMAGE_FOLDER / "odd_png.png").read_bytes()]
    assert names["odd_grayscale.jpg"]["image/format"] == [b"jpeg"]
    skipped = _skipped(reference)
    expected = {"odd_not_an_image.jpg": "not an image", "odd_missing.jpg": "missing image file",
                "odd_wrong_size.jpg": "the annotations say",
                "annotation 900001": "image id 999999 is not listed in images",
                "annotation 900002": "clipped to", "annotation 900003": "nothing inside it, skipped",
                "annotation 900004": "box with no area", "annotation 900005": "unknown category id 12"}
    assert set(expected) == set(ODD_CASES) - {"odd_png.png", "odd_grayscale.jpg"}
    for key, fragment in expected.items():
        reasons = [reason for file, reason in skipped.items() if file == key or file.endswith(f" {key}")]
        assert len(reasons) == 1 and fragment in reasons[0], (key, skipped)
    clipped = names["odd_png.png"]  # annotation 900002 reaches past the right edge: xmax clipped to 1
    assert 1.0 in clipped["image/object/bbox/xmax"]
    assert max(len(record["image/object/class/label"]) for record in records) >= 2  # several boxes per image


def test_the_shards_are_identical_for_one_and_two_workers(coco_set: Path, reference: Path, tmp_path: Path) -> None:
    result = run_cli("data", "coco", str(coco_set / ANNOTATIONS), str(coco_set / IMAGE_FOLDER), "--output",
                     str(tmp_path / "two"), "--shards", str(SHARDS), "--workers", "2")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"converted {IMAGES + 2} images ({IMAGES + 2} train) with ")
    assert "images/s" in result.stdout and "MB/s" in result.stdout and "9 entries skipped or clipped" in result.stdout
    assert len(_digests(reference)) == SHARDS
    assert _digests(tmp_path / "two") == _digests(reference)
    assert (tmp_path / "two" / "skipped.csv").read_bytes() == (reference / "skipped.csv").read_bytes()
    manifest = json.loads((tmp_path / "two" / MANIFEST).read_text())
    assert (manifest["kind"], manifest["settings"]) == ("coco", {"num_classes": 90})
    assert {entry["id"]: entry["name"] for entry in manifest["categories"]} == COCO_CATEGORIES
    verified = run_cli("data", "verify", str(tmp_path / "two"))  # verify reads the kind and runs COCO's check
    assert verified.returncode == 0, verified.stderr
    assert "boxes inside [0, 1]" in verified.stdout


class _Stopped(Exception):
    pass


def test_an_interrupted_run_finishes_with_the_same_bytes(coco_set: Path, reference: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    convert_shard, calls = coco_convert.convert_shard, []

    def fail_after_the_first(task: object) -> object:
        calls.append(task)
        if len(calls) > 1:
            raise _Stopped  # as a kill would: the second shard is never finished
        return convert_shard(task)  # type: ignore[arg-type]

    monkeypatch.setattr(coco_convert, "convert_shard", fail_after_the_first)
    with pytest.raises(_Stopped):
        convert_coco(_options(coco_set, tmp_path / "out"))
    assert len(shard_files(tmp_path / "out")) == 1
    monkeypatch.setattr(coco_convert, "convert_shard", convert_shard)
    summary = convert_coco(_options(coco_set, tmp_path / "out"))
    assert summary.resumed == 1 and 0 < summary.processed < IMAGES + 4  # 4 odd files are read (2 then skipped)
    assert _digests(tmp_path / "out") == _digests(reference)
    assert not [path for path in (tmp_path / "out").iterdir() if ".partial-" in path.name]


@pytest.mark.parametrize(("content", "problem"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "a JSON list, not an object"),
    ('{"images": [], "annotations": []}', "'categories' is missing"),
    ('{"images": {}, "annotations": [], "categories": []}', "'images' is a dict, not a list"),
    ('{"images": [], "annotations": [], "categories": [{"id": "1", "name": "x"}]}', "categories[0]"),
])
def test_a_file_that_is_not_coco_is_one_line(content: str, problem: str, tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text(content)
    result = run_main("data", "coco", str(tmp_path / "bad.json"), str(tmp_path), "--output", str(tmp_path / "out"))
    assert_one_line_error(result, "bad.json", "not a COCO annotations file" if problem != "categories[0]" else "",
                          problem)


def test_verify_check_accepts_the_records_and_catches_bad_ones(reference: Path) -> None:
    records = [parse_example(payload) for payload in _payloads(reference)]
    for record in records:
        assert check_coco_record(record, {"num_classes": 90}, decode=True) is None
        assert check_coco_record(record, {"num_classes": 90}, decode=False) is None
    good: dict = next(record for record in records if record["image/object/class/label"])
    encoded, xmin, boxes = good["image/encoded"][0], good["image/object/bbox/xmin"], len(good["image/object/area"])
    bad = {
        "no image/source_id": {key: value for key, value in good.items() if key != "image/source_id"},
        "not within [0, 1]": {**good, "image/object/bbox/xmin": [1.5] * boxes},
        "in order": {**good, "image/object/bbox/xmax": [max(x - 0.01, 0.0) if x > 0 else 0.0 for x in xmin],
                     "image/object/bbox/xmin": [max(x, 0.02) for x in xmin]},
        "label 91 outside 1..90": {**good, "image/object/class/label": [91] * boxes},
        "is_crowd other than 0 or 1": {**good, "image/object/is_crowd": [2] * boxes},
        "declared jpeg": {**good, "image/width": [good["image/width"][0] + 1]},
        "truncated JPEG": {**good, "image/encoded": [encoded[: len(encoded) // 2]]},
        "different lengths": {**good, "image/object/is_crowd": [0] * (boxes + 1)},
        "image/height is not of type int64": {**good, "image/height": [float(good["image/height"][0])]},
    }
    for fragment, record in bad.items():
        problem = check_coco_record(record, {"num_classes": 90}, decode=False)
        assert problem is not None and fragment in problem, (fragment, problem)
    no_boxes = {**good, **{key: [] for key in good if key.startswith("image/object/")}}
    assert check_coco_record(no_boxes, {"num_classes": 90}, decode=True) is None


def _expected(coco_set: Path) -> dict[str, dict]:
    """Per image id: its JSON entry and the boxes a reader must get, [ymin, xmin, ymax, xmax] clipped to [0, 1]."""
    content = json.loads((coco_set / ANNOTATIONS).read_text())
    images = {str(image["id"]): {**image, "boxes": [], "classes": [], "crowd": [], "areas": []}
              for image in content["images"]}
    for item in content["annotations"]:
        image = images.get(str(item["image_id"]))
        x, y, w, h = item["bbox"]
        if image is None or item["category_id"] not in COCO_CATEGORIES or w <= 0 or h <= 0 or x >= image["width"]:
            continue
        width, height = image["width"], image["height"]
        image["boxes"].append([y / height, x / width, min(y + h, height) / height, min(x + w, width) / width])
        image["classes"].append(item["category_id"])
        image["crowd"].append(bool(item["iscrowd"]))
        image["areas"].append(item["area"])
    return images


def test_tf_models_detection_decoder_reads_every_record(coco_set: Path, reference: Path) -> None:
    """Last in the file: TensorFlow stays loaded in this process (later worker pools would have to spawn)."""
    import numpy as np
    import tensorflow as tf
    from official.vision.dataloaders.tf_example_decoder import TfExampleDecoder

    expected, decoder = _expected(coco_set), TfExampleDecoder()
    payloads = _payloads(reference)
    for payload in payloads:
        decoded = decoder.decode(tf.constant(payload))
        image = expected[decoded["source_id"].numpy().decode()]
        assert decoded["image"].shape == (image["height"], image["width"], 3)
        assert (int(decoded["height"]), int(decoded["width"])) == (image["height"], image["width"])
        np.testing.assert_allclose(decoded["groundtruth_boxes"].numpy().reshape(-1, 4),
                                   np.array(image["boxes"]).reshape(-1, 4), atol=1e-6)
        assert decoded["groundtruth_classes"].numpy().tolist() == image["classes"]
        assert decoded["groundtruth_is_crowd"].numpy().tolist() == image["crowd"]
        np.testing.assert_allclose(decoded["groundtruth_area"].numpy(), image["areas"], rtol=1e-6)
    assert len(payloads) == IMAGES + 2
