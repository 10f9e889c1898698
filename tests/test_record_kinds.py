"""The record-kind registry (``data/record_kinds.py``): every kind registered once with facts that agree with the
schemas, the workloads and the command line, and no code outside it comparing a kind against its name."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_main
from trainbench import workloads
from trainbench.cli.main import build_parser
from trainbench.data.record_kinds import RecordKindSpec, record_kind, record_kinds, register, unnamed_kind
from trainbench.data.record_schemas import RECORD_KINDS, SCHEMAS
from trainbench.data.shards import MANIFEST, shard_name
from trainbench.data.source import open_source, record_format
from trainbench.data.tfrecord_writer import write_shard
from trainbench.errors import UsageError

PACKAGE = Path(__file__).resolve().parents[1] / "source" / "trainbench"


def test_every_kind_is_registered_exactly_once_in_order() -> None:
    names = [spec.name for spec in record_kinds()]
    assert names == list(RECORD_KINDS)
    assert len(set(names)) == len(names)
    for name in RECORD_KINDS:
        assert record_kind(name).name == name
        assert record_kind(name).schema is SCHEMAS[name]


def test_a_second_registration_is_refused() -> None:
    with pytest.raises(ValueError, match="'bert' is registered twice"):
        register(RecordKindSpec("bert", holds="documents", command="data text --workload bert"))
    assert [spec.name for spec in record_kinds()] == list(RECORD_KINDS)  # nothing added


def test_an_unknown_kind_is_one_line_naming_the_known_ones() -> None:
    with pytest.raises(UsageError) as raised:
        record_kind("mnist")
    message = str(raised.value)
    assert "\n" not in message
    assert "'mnist'" in message and all(name in message for name in RECORD_KINDS)


def test_an_unknown_kind_in_a_manifest_is_one_line(tmp_path: Path) -> None:
    write_shard(tmp_path / shard_name("train", 0, 1), iter([]))
    (tmp_path / MANIFEST).write_text(json.dumps({"kind": "mnist", "settings": {}}))
    result = run_main("data", "verify", str(tmp_path))
    assert_one_line_error(result, str(tmp_path / MANIFEST), "unknown record kind 'mnist'", "imagenet, bert")


def test_every_workload_reads_a_registered_kind() -> None:
    for workload in workloads.all_workloads():
        assert record_kind(workload.record_kind).name == workload.record_kind, workload.name
    # The image pipelines' kind is the one of labelled images, read from a folder that may name no kind.
    image_kind = record_kind(workloads.IMAGE_RECORDS)
    assert image_kind.classes == "labels" and image_kind.manifest_optional and not image_kind.is_text


def test_a_folder_naming_no_kind_holds_the_unnamed_kind(tmp_path: Path) -> None:
    assert [spec for spec in record_kinds() if spec.manifest_optional] == [unnamed_kind()]
    write_shard(tmp_path / shard_name("train", 0, 1), iter([]))
    assert record_format(open_source(tmp_path)).kind == unnamed_kind().name


def test_each_command_is_a_data_subcommand_with_its_options() -> None:
    for spec in record_kinds():
        words = spec.command.split()
        args, _ = build_parser().parse_known_args([*words, "in", "in2", "--output", "out"])  # 2 inputs: translate
        assert (args.command, args.data_command) == (words[0], words[1]), spec.name
        if "--workload" in words:
            assert args.workload == spec.name  # the text converter's --workload is the kind it writes


def test_the_settings_are_those_the_schema_lengths_need() -> None:
    for spec in record_kinds():
        needed = {feature.length for feature in spec.schema.values() if isinstance(feature.length, str)}
        assert set(spec.settings) == needed and list(spec.settings) == sorted(needed), spec.name
    assert record_kind("bert").settings == ("max_predictions_per_seq", "seq_len")
    assert record_kind("gpt2").settings == ("block_len",)


def test_object_features_are_coco_boxes_only() -> None:
    for spec in record_kinds():
        assert all(name.startswith("image/object/") for name in spec.object_features)
        assert bool(spec.object_features) == (spec.classes == "category ids"), spec.name
    assert "image/object/bbox/xmin" in record_kind("coco").object_features


def test_text_kinds_have_a_tokenization_that_fits_their_workload() -> None:
    for workload in workloads.all_workloads():
        spec = record_kind(workload.record_kind)
        assert spec.is_text == (workload.tokens_param is not None), workload.name
        if spec.tokenization is None:
            continue
        tokens = spec.tokenization
        # A vocabulary trained at the default size is the published embedding of the kind's own workload, and fits
        # any other reading it (Llama's 128,256 tokens hold GPT-2's 50,257).
        assert tokens.default_size <= workload.dims("full")["vocab"], workload.name
        assert tokens.default_size == workloads.reader_of(workload.record_kind).dims("full")["vocab"]
        assert set(tokens.fixed_ids) <= set(tokens.specials)
        assert tokens.byte_level == (tokens.unknown is None)  # WordPiece has an unknown-word token, BPE bytes none
        assert tokens.byte_level == (len(tokens.files) > 1)  # vocab.json + merges.txt, else one vocab.txt
        assert spec.classes is None
    assert record_kind("translation").pairs and record_kind("translation").texts_per_example == 2
    assert [spec.name for spec in record_kinds() if spec.pairs] == ["translation"]
    assert {spec.holds for spec in record_kinds()} == {"images", "documents", "sentence pairs"}


def _kind_comparisons(path: Path) -> list[str]:
    """``x == "bert"``, ``kind != "coco"``, ``kind in ("bert", "gpt2")``: comparisons against a kind's name."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            values = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else [operand]
            if any(isinstance(value, ast.Constant) and value.value in RECORD_KINDS for value in values):
                found.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {ast.unparse(node)}")
                break
    return found


def test_no_code_compares_a_record_kind_against_its_name() -> None:
    """Code asks the registry's facts (or picks from a dict keyed by kind): a new kind is one registration, not a
    hunt for the places that name the others."""
    modules = sorted(PACKAGE.rglob("*.py"))
    assert len(modules) > 50
    assert [line for path in modules for line in _kind_comparisons(path)] == []
