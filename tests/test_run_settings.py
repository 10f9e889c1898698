"""Which settings two measurements differ in, versions in any notation, the pairs that differ in one, and how a
run's step ran as its header records it."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from trainbench.bench.sweep import run_header
from trainbench.config import BenchConfig, LaunchConfig, ModelConfig, OptimizerConfig, field_default, to_dict
from trainbench.results.header import BEFORE_FORMAT_6, RunHeader
from trainbench.results.run_settings import (
    STEP,
    STEP_SINCE_6,
    Pair,
    differing,
    one_setting_pairs,
    pairs_by_difference,
    same_value,
    step_as_run,
    version_parts,
)
from trainbench.results.store import read_summary

KEPT = Path(__file__).resolve().parents[1] / "benchmarks" / "results" / "h100_torch" / "throughput_torch_fp32_cuda"


def test_versions_in_two_notations_are_one() -> None:
    assert version_parts("cudnn", 90100) == (9, 1, 0)
    assert version_parts("cudnn", "8902") == (8, 9, 2)
    assert version_parts("version of cuda", 12040) == (12, 4)
    assert same_value("version of cudnn", 90100, "9")
    assert same_value("cuda", "12.4", "12.4.0") and same_value("cuda", 12040, "12.4")
    assert not same_value("cuda", "12.4", "12.6")
    assert not same_value("version of torch", "2.1", "2.10")


def test_other_settings_compare_as_they_are() -> None:
    assert differing({"framework": "torch", "batch_size": 8}, {"framework": "tf", "batch_size": 8}) == ["framework"]
    assert differing({"data": None}, {"data": "/d"}) == ["data"]
    assert differing({"precision": "fp32"}, {}) == ["precision"]  # recorded on one side only: a difference
    assert not differing({"gpus": 1, "version of cudnn": 90100}, {"gpus": 1, "version of cudnn": "9.1"})


def test_pairs_differ_in_exactly_one_setting_and_batch_sizes_pair_with_neighbours() -> None:
    rows = [{"framework": f, "precision": "fp32", "batch_size": b} for f in ("torch", "tf") for b in (8, 16, 32)]
    rows.append({"framework": "tf", "precision": "bf16", "batch_size": 64})  # differs from every row in two or more
    pairs = one_setting_pairs(rows)
    assert Pair(0, 3, "framework") in pairs and Pair(2, 5, "framework") in pairs
    assert Pair(0, 1, "batch_size") in pairs and Pair(1, 2, "batch_size") in pairs
    assert Pair(0, 2, "batch_size") not in pairs  # 16 lies between 8 and 32
    assert len(pairs) == 3 + 2 + 2 and all(6 not in (pair.first, pair.second) for pair in pairs)


def _every_two(rows: list[dict[str, object]]) -> tuple[list[Pair], dict[tuple[str, ...], tuple[int, tuple[int, int]]]]:
    """The definition, pair by pair: what the grouping must give."""
    one, apart = [], {}
    order = list(dict.fromkeys(name for row in rows for name in row))  # the settings in the order rows name them
    for first in range(len(rows)):
        for second in range(first + 1, len(rows)):
            names = tuple(sorted(differing(rows[first], rows[second]), key=order.index))
            count, example = apart.get(names, (0, (first, second)))
            apart[names] = (count + 1, example)
            if len(names) != 1:
                continue
            name = names[0]
            if name == "batch_size":  # the one ordered setting: neighbours only
                low, high = sorted((rows[first][name], rows[second][name]))  # type: ignore[type-var]
                if any(low < row[name] < high and not differing({**row, name: None}, {**rows[first], name: None})
                       for row in rows):  # type: ignore[operator]
                    continue
            one.append(Pair(first, second, name))
    return one, apart


ROWS = st.lists(st.fixed_dictionaries({"framework": st.sampled_from(["torch", "tf"]),
                                       "batch_size": st.sampled_from([1, 2, 4, 8]),
                                       "compile": st.sampled_from([None, True, "max-autotune"])},
                                      optional={"gpus": st.sampled_from([1, 2])}), max_size=14)


@given(ROWS)
def test_grouping_finds_what_comparing_every_two_rows_finds(rows: list[dict[str, object]]) -> None:
    one, apart = _every_two(rows)
    assert one_setting_pairs(rows) == one
    assert {names: (found.pairs, found.example) for names, found in pairs_by_difference(rows).items()} == apart


def test_two_hundred_copies_of_a_sweep_group_without_comparing_every_two() -> None:
    rows = [{"framework": "torch", "batch_size": batch, "run": "same"} for _ in range(200) for batch in (8, 16, 32)]
    pairs = one_setting_pairs(rows)
    assert len(pairs) == 2 * 200 * 200 and Pair(0, 1, "batch_size") in pairs and Pair(0, 2, "batch_size") not in pairs
    counts = pairs_by_difference(rows)
    assert counts[()].pairs == 3 * 200 * 199 // 2 and counts[("batch_size",)].pairs == 3 * 200 * 200


def test_a_run_header_records_the_optimizer_beside_the_model_and_reads_back_the_step() -> None:
    model = ModelConfig(framework="torch", workload="bert", size="tiny", device="cpu", matmul_precision="high")
    config = BenchConfig(model=model, batch_size=2, optimizer=OptimizerConfig.reference("bert", "sgd"))
    written = run_header(config).to_json()
    assert written["optimizer"] == to_dict(config.optimizer) and written["model"]["matmul_precision"] == "high"
    assert list(written).index("optimizer") == list(written).index("model") + 1
    read = RunHeader.read(written)
    assert (read.matmul_precision, read.optimizer_name) == ("high", "sgd") and read.to_json() == written
    assert step_as_run(written) == {"matmul_precision": "high", "optimizer": "sgd", "activation_checkpointing": "none",
                                    "shard": "ddp"} and tuple(step_as_run(read)) == STEP
    default = run_header(BenchConfig(model=ModelConfig(device="cpu"), batch_size=2)).to_json()
    assert step_as_run(default) == {"matmul_precision": "highest", "optimizer": "sgd",  # resnet50's reference
                                    "activation_checkpointing": "none", "shard": "ddp"}


def test_a_header_from_before_format_5_reads_the_step_as_unknown_not_as_the_defaults() -> None:
    header = read_summary(KEPT / "summary.json").header  # a kept format 1 run
    assert "optimizer" not in header and "matmul_precision" not in header.get("model", {})
    assert step_as_run(header) == {"matmul_precision": None, "optimizer": None,  # unknown: format 5's
                                   "activation_checkpointing": "none", "shard": "ddp"}  # known: format 6's
    odd = RunHeader.read({"framework": "torch", "optimizer": "adamw", "model": {"matmul_precision": 1}})
    assert (odd.optimizer, odd.optimizer_name, odd.matmul_precision) == (None, None, None)
    assert odd.to_json()["optimizer"] == "adamw"  # no object: kept in extra, written back as it was


# --- format 6: activation checkpointing and shard -------------------------------------------------------------------


def test_a_run_header_records_recomputation_and_sharding_in_the_model_and_reads_them_back() -> None:
    model = ModelConfig(framework="torch", workload="gpt2", size="tiny", device="cpu",
                        activation_checkpointing="full", shard="fsdp")
    launch = LaunchConfig(processes_per_node=2)
    written = run_header(BenchConfig(model=model, batch_size=2, launch=launch)).to_json()
    assert (written["model"]["activation_checkpointing"], written["model"]["shard"]) == ("full", "fsdp")
    read = RunHeader.read(written)
    assert (read.activation_checkpointing, read.shard) == ("full", "fsdp") and read.to_json() == written
    assert {name: step_as_run(written)[name] for name in STEP_SINCE_6} == {"activation_checkpointing": "full",
                                                                           "shard": "fsdp"}


def test_a_format_5_header_ran_without_recomputation_and_with_replicas_known_not_unknown() -> None:
    """Before format 6 the suite could neither recompute nor shard: a header without the keys reads "none" and "ddp"
    (so it pairs with a format-6 run of the same step), while format 5's own settings read as recorded."""
    format_5 = {"framework": "torch", "precision": "fp32", "launch": {"processes_per_node": 2, "nodes": 1},
                "model": {"framework": "torch", "matmul_precision": "highest"}, "optimizer": {"name": "sgd"}}
    read = RunHeader.read(format_5)
    assert (read.activation_checkpointing, read.shard) == ("none", "ddp")
    assert step_as_run(format_5) == {"matmul_precision": "highest", "optimizer": "sgd",
                                     "activation_checkpointing": "none", "shard": "ddp"}
    assert "shard" not in read.to_json()["model"]  # read as known, never written into the file
    no_model = RunHeader.read({"framework": "tf"})  # an older profile's header: nothing inside a model
    assert (no_model.activation_checkpointing, no_model.shard) == ("none", "ddp")
    current = run_header(BenchConfig(model=ModelConfig(device="cpu"), batch_size=2)).to_json()
    assert differing(step_as_run(format_5), step_as_run(current)) == []  # the same step, and it says so
    odd = RunHeader.read({"model": {"activation_checkpointing": True, "shard": 2}})
    assert (odd.activation_checkpointing, odd.shard) == (None, None)  # no text: not recorded, never made up


def test_what_runs_before_format_6_ran_is_the_model_configuration_s_defaults() -> None:
    """results.header cannot import config (a lower layer): its copy of the defaults must stay theirs."""
    assert {name: field_default(ModelConfig, name) for name in STEP_SINCE_6} == BEFORE_FORMAT_6
    assert STEP[-len(STEP_SINCE_6):] == STEP_SINCE_6


def test_a_header_without_a_sample_unit_reads_its_workloads() -> None:
    # A hand-made or partial BERT header counts sequences, not images; one naming no workload is ResNet-50's.
    assert RunHeader.read({"workload": "bert"}).sample_unit == "sequence"
    assert RunHeader.read({}).sample_unit == "image"
    assert RunHeader.read({"workload": "bert", "sample_unit": "sequence"}).sample_unit == "sequence"
