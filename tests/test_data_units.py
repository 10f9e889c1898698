"""The conversion's parts on in-memory data: image sniffing, bounding boxes, record encoding, the shard plan."""

from __future__ import annotations

import io
import json
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from tests.conftest import assert_one_line_error, run_cli
from trainbench.data import crc32c as crc32c_module
from trainbench.data.bboxes import Box, read_boxes
from trainbench.data.imagefiles import SkipImage, check_signature, jpeg_is_complete, prepare_image
from trainbench.data.imagenet_tree import ImageTree, Source
from trainbench.data.progress import format_progress
from trainbench.data.shards import MANIFEST, Manifest, ShardResult, plan_shards
from trainbench.data.tfrecord_reader import parse_example, read_records
from trainbench.data.tfrecord_writer import bytes_feature, encode_example, float_feature, frame, int64_feature
from trainbench.errors import UsageError


def _picture(mode: str = "RGB", size: tuple[int, int] = (64, 48)) -> Image.Image:
    pixels = np.random.default_rng(0).integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


def _encoded(image: Image.Image, kind: str) -> bytes:
    out = io.BytesIO()
    image.save(out, kind)
    return out.getvalue()


def test_an_rgb_jpeg_is_stored_byte_for_byte_with_its_header_size() -> None:
    data = _encoded(_picture(size=(64, 48)), "JPEG")
    prepared = prepare_image(data)
    assert prepared.encoded is data and (prepared.width, prepared.height) == (64, 48)
    assert prepared.conversion is None


def test_a_progressive_jpeg_is_stored_as_is() -> None:
    out = io.BytesIO()
    _picture().save(out, "JPEG", progressive=True)
    assert prepare_image(out.getvalue()).encoded == out.getvalue()


@pytest.mark.parametrize(("mode", "kind", "source"), [
    ("RGB", "PNG", "PNG RGB"), ("RGBA", "PNG", "PNG RGBA"), ("CMYK", "JPEG", "JPEG CMYK"), ("L", "JPEG", "JPEG L"),
    ("P", "PNG", "PNG P"), ("RGB", "BMP", "BMP RGB"),
])
def test_other_images_become_rgb_jpegs_of_the_same_size(mode: str, kind: str, source: str) -> None:
    prepared = prepare_image(_encoded(_picture(mode, (40, 30)), kind))
    assert prepared.conversion == f"{source} -> RGB JPEG"
    decoded = Image.open(io.BytesIO(prepared.encoded))
    assert (decoded.format, decoded.mode, decoded.size) == ("JPEG", "RGB", (40, 30))
    assert (prepared.width, prepared.height) == (40, 30)


def test_transparent_pixels_become_white() -> None:
    clear = Image.new("RGBA", (16, 16), (255, 0, 0, 0))
    decoded = Image.open(io.BytesIO(prepare_image(_encoded(clear, "PNG")).encoded))
    assert min(decoded.getpixel((8, 8))) > 245  # type: ignore[arg-type]


@pytest.mark.parametrize(("data", "reason"), [
    (b"", "empty file"),
    (b"<html>404</html>", "not an image"),
    (_encoded(_picture(), "JPEG")[:-500], "truncated JPEG"),
    (_encoded(_picture(), "PNG")[:-500], "truncated or corrupt PNG"),
    (_encoded(_picture("L"), "JPEG")[:-500], "truncated or corrupt JPEG"),
    (_encoded(_picture(), "JPEG")[:100], "unreadable image header"),
])
def test_unusable_files_are_skipped_with_the_reason(data: bytes, reason: str) -> None:
    with pytest.raises(SkipImage, match=reason):
        prepare_image(data)


@pytest.mark.parametrize("kind", ["JPEG", "PNG", "GIF", "BMP", "TIFF", "WEBP"])
def test_an_image_is_recognised_by_its_first_bytes(kind: str) -> None:
    check_signature(_encoded(_picture(), kind)[:16])  # raises SkipImage otherwise


@pytest.mark.parametrize("head", [b"x", b"\x00" * 16, b"PK\x03\x04 a zip file", b"%PDF-1.7\n%\xe2\xe3\xcf\xd3"])
def test_a_file_without_an_image_signature_is_not_an_image(head: bytes) -> None:
    with pytest.raises(SkipImage, match="not an image"):
        check_signature(head)


def test_the_end_marker_of_an_exif_thumbnail_does_not_hide_a_truncation() -> None:
    thumbnail = _encoded(_picture(size=(8, 8)), "JPEG")  # carries its own end marker inside APP1
    app1 = b"\xff\xe1" + (len(thumbnail) + 2).to_bytes(2, "big") + thumbnail
    full = _encoded(_picture(), "JPEG")
    with_thumbnail = full[:2] + app1 + full[2:]
    assert jpeg_is_complete(with_thumbnail)
    assert not jpeg_is_complete(with_thumbnail[: len(with_thumbnail) - 200])


VOC = b"""<annotation><size><width>200</width><height>100</height><depth>3</depth></size>
<object><name>n01</name><bndbox><xmin>20</xmin><ymin>10</ymin><xmax>120</xmax><ymax>60</ymax></bndbox></object>
<object><name>n01</name><bndbox><xmin>150</xmin><ymin>90</ymin><xmax>250</xmax><ymax>40</ymax></bndbox></object>
<object><name>n01</name><bndbox><xmin>300</xmin><ymin>0</ymin><xmax>400</xmax><ymax>50</ymax></bndbox></object>
</annotation>"""


def test_voc_boxes_are_normalised_ordered_clamped_and_empty_ones_dropped() -> None:
    boxes = read_boxes(VOC, width=999, height=999)  # the annotation's own size wins
    assert boxes == [Box(0.1, 0.1, 0.6, 0.6), Box(0.75, 0.4, 1.0, 0.9)]


def test_voc_without_a_size_uses_the_image_size() -> None:
    xml = b"<annotation><object><bndbox><xmin>0</xmin><ymin>0</ymin><xmax>32</xmax><ymax>24</ymax></bndbox>" \
          b"</object></annotation>"
    assert read_boxes(xml, width=64, height=48) == [Box(0.0, 0.0, 0.5, 0.5)]


@pytest.mark.parametrize("xml", [b"<annotation><object>", b"<a><bndbox><xmin>x</xmin></bndbox></a>"])
def test_malformed_voc_is_a_value_error(xml: bytes) -> None:
    with pytest.raises(ValueError):
        read_boxes(xml, 10, 10)


def test_encoded_examples_read_back_with_every_kind_of_feature(tmp_path: Path) -> None:
    features = {"b": bytes_feature([b"x" * 300, b""]), "f": float_feature([0.25, -1.5]),
                "i": int64_feature([1, 300, -2]), "empty": float_feature([])}
    payload = encode_example(features)
    (tmp_path / "shard").write_bytes(b"".join(frame(payload) * 2))
    records = list(read_records(tmp_path / "shard"))
    assert records == [payload, payload]
    parsed = parse_example(records[0])
    assert parsed == {"b": [b"x" * 300, b""], "f": [0.25, -1.5], "i": [1, 300, -2], "empty": []}


def _tree(train: int, validation: int) -> ImageTree:
    def sources(split: str, count: int) -> tuple[Source, ...]:
        return tuple(Source(f"{split}/n{i % 3}/{i}.JPEG", i, f"n{i % 3}", i % 3 + 1, None) for i in range(count))
    return ImageTree(Path("."), ("n0", "n1", "n2"), sources("train", train), sources("val", validation))


def test_the_plan_shuffles_with_the_seed_and_cuts_nearly_equal_shards() -> None:
    tasks = plan_shards(_tree(103, 10), train_shards=4, validation_shards=3, seed=7)
    assert [task.name for task in tasks] == [f"train-0000{i}-of-00004" for i in range(4)] + \
        [f"validation-0000{i}-of-00003" for i in range(3)]
    assert [len(task.sources) for task in tasks] == [25, 26, 26, 26, 3, 3, 4]
    train = [source for task in tasks[:4] for source in task.sources]
    assert set(train) == set(_tree(103, 0).train) and train != list(_tree(103, 0).train)
    assert plan_shards(_tree(103, 10), 4, 3, seed=7) == tasks
    assert plan_shards(_tree(103, 10), 4, 3, seed=8) != tasks
    assert not [task for task in plan_shards(_tree(5, 0), 2, 2, 0) if task.split == "validation"]


def test_progress_line_shows_rate_and_eta() -> None:
    line = format_progress("convert", 250, 1000, 5.0)
    assert "250/1,000 images" in line and "50.0 images/s" in line and "ETA 0:00:15" in line
    assert line.count("#") == 7
    assert "ETA" not in format_progress("verify", 10, None, 1.0)
    assert math.isfinite(len(format_progress("x", 0, 0, 0.0)))


# CRC-32C: RFC 3720 (iSCSI) appendix B.4's vectors and the standard check value, for the library and the fallback.
CRC_VECTORS = [
    (bytes(32), 0x8A9136AA),
    (b"\xff" * 32, 0x62A8AB43),
    (bytes(range(32)), 0x46DD794E),
    (bytes(range(31, -1, -1)), 0x113FDB5C),
    (b"123456789", 0xE3069283),
    (b"", 0x00000000),
]


@pytest.mark.parametrize("implementation", [crc32c_module.crc32c, crc32c_module.crc32c_numpy])
@pytest.mark.parametrize(("data", "expected"), CRC_VECTORS)
def test_crc32c_matches_the_published_vectors(implementation: Callable[[bytes], int], data: bytes,
                                              expected: int) -> None:
    assert implementation(data) == expected
    assert implementation(memoryview(data)) == expected


def test_the_c_library_is_what_runs_and_agrees_with_numpy_on_long_records() -> None:
    assert crc32c_module.IMPLEMENTATION == "google-crc32c (C)"  # pinned in constraints.txt: no silent fallback
    rng = np.random.default_rng(5)
    for size in (1023, 1024, 110_000, 1_000_003):
        data = rng.integers(0, 256, size, dtype=np.uint8).tobytes()
        assert crc32c_module.crc32c(data) == crc32c_module.crc32c_numpy(data)


def test_the_crc_setting_picks_the_library_or_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    library = crc32c_module._c_library()
    assert library is not None and crc32c_module._choose("") is library
    assert crc32c_module._choose(crc32c_module.LIBRARY) is library
    assert crc32c_module._choose("numpy") is None
    monkeypatch.setattr(crc32c_module, "_c_library", lambda: None)  # the package missing: numpy, quietly
    assert crc32c_module._choose("") is None
    with pytest.raises(UsageError, match="google-crc32c package with its C extension is not installed"):
        crc32c_module._choose(crc32c_module.LIBRARY)


def test_an_unknown_crc_setting_is_one_line_naming_the_choices(tmp_path: Path) -> None:
    result = run_cli("data", "verify", str(tmp_path), env={crc32c_module.ENVIRONMENT: "Numpy"})
    assert_one_line_error(result, "TRAINBENCH_CRC32C='Numpy'", "use numpy or google-crc32c")


def test_the_manifest_lists_shards_by_name_whatever_order_they_finished_in(tmp_path: Path) -> None:
    """manifest.json's bytes: the header's keys as given, then the shards sorted by name, each entry's keys in
    the order split, records, bytes, sha256, converted, skipped; two-space indent, one final newline."""
    header = {"format": "trainbench-tfrecords/1", "fingerprint": "f" * 64, "num_classes": 2}
    manifest = Manifest(tmp_path, header, {})
    finished = [ShardResult("validation-00000-of-00001", "validation", 1, 10, "c" * 64, 0),
                ShardResult("train-00001-of-00002", "train", 2, 20, "b" * 64, 1, [("x.JPEG", "not an image")]),
                ShardResult("train-00000-of-00002", "train", 3, 30, "a" * 64, 0)]
    for result in finished:  # a later shard finished first, as with several workers
        manifest.record(result)
    shard = '"{}": {{\n      "split": "{}",\n      "records": {},\n      "bytes": {},\n      "sha256": "{}",\n' \
        '      "converted": {},\n      "skipped": {}\n    }}'
    expected = (
        '{\n  "format": "trainbench-tfrecords/1",\n  "fingerprint": "' + "f" * 64 + '",\n  "num_classes": 2,\n'
        '  "shards": {\n    '
        + shard.format("train-00000-of-00002", "train", 3, 30, "a" * 64, 0, "[]") + ",\n    "
        + shard.format("train-00001-of-00002", "train", 2, 20, "b" * 64, 1,
                       '[\n        [\n          "x.JPEG",\n          "not an image"\n        ]\n      ]') + ",\n    "
        + shard.format("validation-00000-of-00001", "validation", 1, 10, "c" * 64, 0, "[]")
        + "\n  }\n}\n")
    assert (tmp_path / MANIFEST).read_bytes() == expected.encode()
    assert list(json.loads(expected)["shards"]) == sorted(result.name for result in finished)
