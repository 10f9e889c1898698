"""Which settings two measurements differ in, versions in any notation, and the pairs that differ in one."""

from __future__ import annotations

from trainbench.results.run_settings import Pair, differing, one_setting_pairs, same_value, version_parts


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
