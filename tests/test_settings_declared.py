"""The workloads' shape settings are declared once (``workloads.settings``) and every list of them is derived: the
declaration holds exactly the registered workloads' params and ModelConfig's shape fields, and each output that
names a setting (option, message, config-string token, words, table header) says what it declares."""

from __future__ import annotations

import argparse
import dataclasses

import pytest

from trainbench import workloads
from trainbench.analysis.measurements import NOT_SETTINGS, PARAMETERS
from trainbench.bench.compare import SETTINGS as COMPARED
from trainbench.campaign.matrix import AXES, AXIS_DEFAULTS, Matrix, config_string
from trainbench.cli.main import build_parser
from trainbench.config import PARAM_FIELDS, PARAM_NAMES, ModelConfig, field_default
from trainbench.report.ranking import SETTINGS as RANKED
from trainbench.report.ranking import SPACE
from trainbench.report.sections.settings import phrase, title_of
from trainbench.results.header import RunHeader
from trainbench.results.run_settings import recorded_at, settings_as_run
from trainbench.workloads.settings import MODELLED, NAMES, SETTINGS, SHAPES, checked_bounds, named, shape_words


def test_the_declared_settings_are_exactly_the_workloads_params() -> None:
    assert set(NAMES) == {name for workload in workloads.all_workloads() for name in workload.params}
    assert len(set(NAMES)) == len(NAMES)


def test_the_declared_settings_are_exactly_model_configs_shape_fields_in_its_order() -> None:
    assert PARAM_FIELDS == NAMES
    fields = [item.name for item in dataclasses.fields(ModelConfig)]
    assert [name for name in fields if name in NAMES] == list(NAMES)
    # each is optional: None is the workload's default at its size
    assert all(field_default(ModelConfig, name) is None for name in NAMES)


def test_a_header_repeats_at_its_top_level_only_what_run_header_reads_there() -> None:
    header_fields = {item.name for item in dataclasses.fields(RunHeader)}
    assert {setting.name for setting in SETTINGS if setting.in_header} <= header_fields
    assert [name for name in COMPARED if name in NAMES] == [setting.name for setting in SETTINGS if setting.in_header]


def test_every_list_of_settings_is_derived_from_the_declaration() -> None:
    assert {setting.name: setting.words for setting in SETTINGS} == PARAM_NAMES
    assert [axis for axis in AXES if axis in NAMES] == [*SHAPES, *(name for name in NAMES if name not in SHAPES)]
    assert all(name in AXIS_DEFAULTS and AXIS_DEFAULTS[name] is None for name in NAMES)
    assert ("batch_size", "gpus", *MODELLED) == PARAMETERS
    assert {*MODELLED, *(f"params.{name}" for name in MODELLED)} <= NOT_SETTINGS
    assert not {name for name in NAMES if name not in MODELLED} & NOT_SETTINGS  # num_classes splits models
    assert [name for name in RANKED if name in NAMES] == list(SHAPES)
    assert [name for name in SPACE if name in NAMES] == list(SHAPES)
    assert SHAPES == ("image_size", "seq_len") and MODELLED == SHAPES  # today's choice, held here once


def test_each_settings_option_is_declared_with_the_widest_checked_bounds() -> None:
    parser = build_parser()
    throughput = next(action for action in parser._actions if isinstance(action, argparse._SubParsersAction))
    options = {option: action for action in throughput.choices["throughput"]._actions
               for option in action.option_strings}
    for setting in SETTINGS:
        action = options[setting.option]
        assert action.dest == setting.name and action.metavar == setting.metavar
        assert action.help is not None and action.help.startswith(f"{setting.option_help} (")
        low, high = checked_bounds(setting.name)
        assert action.type is not None
        assert action.type(str(low)) == low and action.type(str(high)) == high
        with pytest.raises(argparse.ArgumentTypeError):
            action.type(str(high + 1))


def test_the_checked_bounds_are_the_default_workloads_else_the_widest() -> None:
    assert checked_bounds("image_size") == (32, 4096)  # ResNet-50's: config.MIN_IMAGE_SIZE, MAX_IMAGE_SIZE
    assert checked_bounds("num_classes") == (2, 2**20)
    assert checked_bounds("seq_len") == (2, 131072)  # transformer's shortest, Llama's longest (its positions)


def test_config_strings_carry_the_declared_prefixes() -> None:
    matrix = Matrix({"workload": ("resnet50", "bert"), "image_size": (64,), "seq_len": (16,), "num_classes": (5, 6),
                     "batch_size": (1,)})
    values = {"workload": "resnet50", "image_size": 64, "seq_len": 16, "num_classes": 5}
    assert config_string(matrix, values) == "resnet50-torch-fp32-img64-cls5"
    assert config_string(matrix, {**values, "workload": "bert"}) == "bert-torch-fp32-seq16-cls5"
    assert all(setting.prefix.isalpha() for setting in SETTINGS)


def test_a_value_in_words_in_each_form() -> None:
    assert [named(name).text(64) for name in NAMES] == ["64 px", "num_classes 64", "seq_len 64"]
    assert [named(name).text(64, "label") for name in SHAPES] == ["64px", "seq_len 64"]
    assert [named(name).text(64, "amount") for name in SHAPES] == ["64 px", "64 tokens"]
    assert [named(name).text(64, "title") for name in SHAPES] == ["image 64px", "seq_len 64"]
    assert shape_words({"image_size": 224, "num_classes": 10}) == ["224 px"]  # the number of classes is no shape
    assert shape_words({"seq_len": 128, "image_size": None}) == ["seq_len 128"]
    assert shape_words({}) == []
    assert [phrase(name, 64) for name in NAMES] == ["64 px", "num_classes 64", "seq_len 64"]
    assert [title_of(name) for name in NAMES] == ["image size", "num_classes", "sequence length"]


def test_a_runs_settings_are_read_from_where_its_header_records_them() -> None:
    header = {"image_size": 64, "params": {"image_size": 64, "num_classes": 10, "seq_len": None}}
    assert settings_as_run(header) == {"image_size": 64, "num_classes": 10, "seq_len": None}
    bert = {"params": {"seq_len": 128}}
    assert settings_as_run(bert) == settings_as_run(RunHeader.read(bert)) == \
        {"image_size": None, "num_classes": None, "seq_len": 128}
    older_profile = {"model": {"image_size": 32}}  # before the header: inside the model only
    assert settings_as_run(older_profile)["image_size"] == 32
    assert [recorded_at(name) for name in NAMES] == ["image_size", "params.num_classes", "params.seq_len"]
