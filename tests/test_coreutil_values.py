"""coreutil's figures against an independent, straightforward computation (csv module and plain loops).

The reference below knows nothing of pandas or of the code under test: it finds the header line, walks the rows
one by one, keeps the first value of every (launch, metric), rescales durations to ns and sums w * x and w in
Python. It runs on the shared real profiler outputs and on CSVs written here (thousands separators, several
processes reusing IDs, mixed time units, ragged and rule rows, n/a, every weight fallback, raw and nvprof pages).
"""

from __future__ import annotations

import csv
import math
import random
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trainbench.analysis import analyze_file, read_ncu_csv, read_nvprof_csv, read_profile
from trainbench.errors import UsageError

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "ncu"

# --------------------------------------------------------------------------------------------------------------
# The reference, written from the issue text only.

TIME_NS = {"nsecond": 1.0, "usecond": 1e3, "msecond": 1e6, "second": 1e9, "ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}
# Other rescaled spellings seen in the fixtures, to their unprefixed unit (ncu's prefixes are decimal).
OTHER_SCALES = {"Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Gbyte/s": 1e9, "Mbyte/s": 1e6, "Ghz": 1e9, "Mhz": 1e6}
SCALES = {**TIME_NS, **OTHER_SCALES}
REF_WEIGHTS = ["gpc__cycles_elapsed.max", "sm__cycles_elapsed.avg", "smsp__cycles_elapsed.avg",
               "gpu__time_duration.sum"]
ELAPSED = ".avg.pct_of_peak_sustained_elapsed"
ACTIVE = ".avg.pct_of_peak_sustained_active"

Launches = dict[tuple[int, int], dict[str, object]]


def ref_rows(path: Path, starts: tuple[str, ...] = ('"ID",', "ID,")) -> list[list[str]]:
    lines = path.read_bytes().decode("utf-8", errors="replace").splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(starts))
    return list(csv.reader(lines[first:]))


def ref_number(text: str) -> float | None:
    try:
        value = float(text.replace(",", "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def ref_details(path: Path) -> Launches:
    """{(pid, id): {"kernel": name, "metrics": {name: value or None}}} from the long layout."""
    rows = ref_rows(path)
    column: dict[str, int] = {}
    for i, name in enumerate(rows[0]):
        column.setdefault(name, i)
    launches: Launches = {}
    for row in rows[1:]:

        def get(name: str, row: list[str] = row) -> str:
            i = column.get(name)
            return row[i] if i is not None and i < len(row) else ""

        try:
            key = (int(get("Process ID") or "0"), int(get("ID")))
        except ValueError:
            continue
        launch = launches.setdefault(key, {"kernel": get("Kernel Name"), "metrics": {}})
        name = get("Metric Name")
        if not name:
            continue
        value = ref_number(get("Metric Value"))
        if value is not None and get("Metric Unit") in SCALES:
            value *= SCALES[get("Metric Unit")]
        launch["metrics"].setdefault(name, value)  # type: ignore[union-attr]
    return launches


def ref_raw(path: Path) -> Launches:
    rows = ref_rows(path)
    header, body = rows[0], rows[1:]
    units = [""] * len(header)
    if body and not body[0][0].strip().isdigit():
        units, body = body[0], body[1:]
    launches: Launches = {}
    for row in body:
        values = dict(zip(header, row, strict=False))
        key = (int(values["Process ID"]), int(values["ID"]))
        metrics = {}
        for i, name in enumerate(header):
            if i < len(row) and ("pct_of_peak" in name or name in REF_WEIGHTS):
                value = ref_number(row[i])
                unit = units[i] if i < len(units) else ""
                metrics[name] = value * SCALES[unit] if value is not None and unit in SCALES else value
        launches.setdefault(key, {"kernel": values.get("Kernel Name", ""), "metrics": metrics})
    return launches


def ref_weight(launches: Launches) -> str | None:
    for name in REF_WEIGHTS:
        if any(launch["metrics"].get(name) is not None for launch in launches.values()):  # type: ignore[union-attr]
            return name
    return None


def ref_mean(launches: Iterable[dict[str, object]], metric: str, weight: str | None) -> float | None:
    numerator = denominator = 0.0
    for launch in launches:
        metrics: dict[str, float | None] = launch["metrics"]  # type: ignore[assignment]
        value = metrics.get(metric)
        if value is None:
            continue
        w = 1.0 if weight is None else max(metrics.get(weight) or 0.0, 0.0)
        numerator += value * w
        denominator += w
    return numerator / denominator if denominator > 0 else None


def ref_means(launches: Launches) -> dict[str, float | None]:
    weight = ref_weight(launches)
    names = {m for launch in launches.values() for m in launch["metrics"] if "pct_of_peak" in m}  # type: ignore[attr-defined]
    return {name: ref_mean(launches.values(), name, weight) for name in names}


def ref_per_kernel(launches: Launches, metric: str) -> dict[str, tuple[int, float | None, float | None]]:
    """{kernel: (launches, share of the weight in %, weighted mean of metric)}."""
    weight = ref_weight(launches)
    groups: dict[str, list[dict[str, object]]] = {}
    for launch in launches.values():
        groups.setdefault(str(launch["kernel"]), []).append(launch)

    def w(launch: dict[str, object]) -> float:
        return 1.0 if weight is None else max(launch["metrics"].get(weight) or 0.0, 0.0)  # type: ignore[attr-defined]

    total = sum(w(launch) for launch in launches.values())
    return {
        kernel: (len(members), sum(w(m) for m in members) / total * 100 if total else None,
                 ref_mean(members, metric, weight))
        for kernel, members in groups.items()
    }


def close(actual: float | None, expected: float | None) -> bool:
    if expected is None:
        return actual is None or math.isnan(actual)
    return actual is not None and math.isclose(actual, expected, rel_tol=1e-9, abs_tol=1e-9)


def assert_means_match(path: Path, launches: Launches) -> None:
    result = analyze_file(path)
    expected = ref_means(launches)
    assert set(result.metrics.index) == set(expected)
    for name, value in expected.items():
        assert close(result.metrics[name], value), (name, result.metrics[name], value)
    assert result.launches == len(launches)
    assert result.weight == (ref_weight(launches) or "equal")


def fixture(name: str) -> Path:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"shared fixture {name} is absent")
    return path


# --------------------------------------------------------------------------------------------------------------
# Shared real profiler outputs.

DETAILS_FIXTURES = [
    "ncu_details_2023_rulecols_leleucas_bert_torch_nsight.csv",
    "ncu_details_a100_2022_kerneltime_leleucas_dropout_nsight162.csv",
    "ncu_details_a100_2022_prof_prefix_leleucas_nsight_virtual.csv",
    "ncu_details_cc120_2025_rules_na_codegandee_kernel0001.csv",
]


@pytest.mark.parametrize("name", DETAILS_FIXTURES)
def test_details_fixture_means_match_reference(name: str) -> None:
    path = fixture(name)
    assert_means_match(path, ref_details(path))


@pytest.mark.parametrize("name", [*DETAILS_FIXTURES, "ncu_details_a100_gardenia_gemm.csv"])
def test_details_fixture_every_value_matches_reference(name: str) -> None:
    path = fixture(name)
    launches = ref_details(path)
    frame = read_ncu_csv(path)
    assert list(frame.index) == sorted(launches)
    for key, launch in launches.items():
        assert frame.loc[key, "Kernel Name"] == launch["kernel"]
        for metric, value in launch["metrics"].items():  # type: ignore[attr-defined]
            assert close(frame.loc[key, metric], value), (key, metric, frame.loc[key, metric], value)


def test_fixture_quirks() -> None:
    bert = read_ncu_csv(fixture("ncu_details_2023_rulecols_leleucas_bert_torch_nsight.csv"))
    assert len(bert) == 26  # ragged rows and rule rows did not lose or invent launches
    assert max(len(name) for name in bert["Kernel Name"]) > 1000
    dropout = read_ncu_csv(fixture("ncu_details_a100_2022_kerneltime_leleucas_dropout_nsight162.csv"))
    assert len(dropout) == 162 and dropout.index.max() == (33512, 161)  # the last launch is there
    assert dropout["Kernel Name"].nunique() == 1
    rtx = read_ncu_csv(fixture("ncu_details_cc120_2025_rules_na_codegandee_kernel0001.csv"))
    assert rtx.attrs["units"]["gpu__time_duration.sum"] == "nsecond"  # printed in "us"
    assert math.isnan(rtx.iloc[0]["flop_count_hp.sum"])  # "n/a": missing, not 0
    assert rtx.iloc[0]["Elapsed Cycles"] == 13485.0  # "13,485"
    gemm = read_ncu_csv(fixture("ncu_details_a100_gardenia_gemm.csv"))
    assert gemm.iloc[0]["dram__bytes.sum"] == 5318969728.0  # "5,318,969,728.00"


def test_gardenia_has_no_utilization_metric() -> None:
    with pytest.raises(UsageError, match="pct_of_peak"):
        analyze_file(fixture("ncu_details_a100_gardenia_gemm.csv"))


def test_raw_fixture_matches_reference() -> None:
    path = fixture("ncu_raw_b200_2025_prof_prefix_meinie_flashinfer_decode_2kernels.csv")
    launches = ref_raw(path)
    assert len(launches) == 16
    assert_means_match(path, launches)
    result = analyze_file(path)
    assert result.weight == "gpu__time_duration.sum"
    expected_metrics = {
        "fma": "sm__inst_executed_pipe_fma" + ELAPSED,
        "fp16": "sm__inst_executed_pipe_fma_type_fp16" + ELAPSED,  # CC 10.0 has no pipe_fp16
        "tensor": "sm__pipe_tensor_cycles_active" + ELAPSED,
        "sfu": "sm__inst_executed_pipe_xu" + ELAPSED,
    }
    for core, metric in expected_metrics.items():
        assert result.cores[core].metric == metric
        assert close(result.cores[core].value, ref_mean(launches.values(), metric, "gpu__time_duration.sum"))
    assert result.cores["tensor"].value == 0.0  # really 0 in the profile, not a stand-in for n/a
    table = result.per_kernel
    reference = ref_per_kernel(launches, expected_metrics["fma"])
    assert set(table.index) == set(reference)
    for kernel, (count, share, fma) in reference.items():
        assert table.loc[kernel, "launches"] == count
        assert close(table.loc[kernel, "weight_share"], share)
        assert close(table.loc[kernel, "fma"], fma)
    assert list(table["weight_share"]) == sorted(table["weight_share"], reverse=True)


def test_nvprof_fixture_levels_times_ten() -> None:
    path = fixture("nvprof_metrics_all_gtx1080ti_magus_matrixMul.csv")
    rows = ref_rows(path, ('"Device","Kernel","Invocations"',))
    levels: dict[str, int] = {}
    for row in rows[1:]:
        match = re.search(r"\((\d+)\)", row[-1])
        if row[3].endswith("_fu_utilization") and match:
            levels.setdefault(row[3], int(match.group(1)))
    result = analyze_file(path)
    assert result.weight == "invocations" and result.launches == 301
    assert result.cores["fma"].value == levels["single_precision_fu_utilization"] * 10 == 30.0
    assert result.cores["fp16"].value == levels["half_precision_fu_utilization"] * 10
    assert result.cores["sfu"].value == levels["special_fu_utilization"] * 10
    assert result.cores["tensor"].value is None  # Pascal: no tensor_precision_fu_utilization
    assert {name: value for name, value in result.metrics.items()} == {k: v * 10.0 for k, v in levels.items()}
    assert result.note and "x 10" in result.note


@pytest.mark.parametrize(
    "name",
    [
        "ncu_nocsv_edge_meinie_app_error.csv",
        "nsys_stats_cuda_gpu_kern_sum_codegandee_decode.csv",
        "nvprof_gputrace_gtx1080ti_magus_matrixMul_ms.csv",
        "nvprof_gpusummary_titanxp_nanzifan_cfd.csv",
    ],
)
def test_files_without_a_metrics_table_are_refused(name: str) -> None:
    with pytest.raises(UsageError, match="no ncu or nvprof metrics table"):
        analyze_file(fixture(name))


# --------------------------------------------------------------------------------------------------------------
# Generated files.

HEADER_2023 = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
               "Grid Size", "Device", "CC", "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
HEADER_2021 = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Kernel Time", "Context", "Stream",
               "Section Name", "Metric Name", "Metric Unit", "Metric Value"]
PIPES = {core: f"sm__inst_executed_pipe_{pipe}{ELAPSED}" for core, pipe in
         (("fma", "fma"), ("fp16", "fp16"), ("tensor", "tensor"), ("sfu", "xu"))}

Row = tuple[int, int, str, str, str, str]  # pid, id, kernel, metric, unit, value text


def details_line(header: list[str], row: Row) -> list[str]:
    pid, launch, kernel, metric, unit, value = row
    fields = {"ID": str(launch), "Process ID": str(pid), "Process Name": "python3", "Host Name": "127.0.0.1",
              "Kernel Name": kernel, "Kernel Time": "2022-Nov-17 14:13:26", "Context": "1", "Stream": "7",
              "Block Size": "(256, 1, 1)", "Grid Size": "(80, 1, 1)", "Device": "0", "CC": "8.0",
              "Section Name": "Command line profiler metrics", "Metric Name": metric, "Metric Unit": unit,
              "Metric Value": value}
    return [fields.get(name, "") for name in header]


def write_details(path: Path, rows: Iterable[Row], header: list[str] = HEADER_2023, preamble: str = "",
                  tail: str = "", newline: str = "\n", extra: Callable[[list[str]], list[str]] = lambda f: f) -> Path:
    with path.open("w", newline="") as handle:
        handle.write(preamble)
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator=newline)
        writer.writerow(header)
        for row in rows:
            writer.writerow(extra(details_line(header, row)))
        handle.write(tail)
    return path


def thousands(value: float) -> str:
    return f"{value:,.2f}"


def simple_rows(count: int, pid: int = 4242, seed: int = 1) -> list[Row]:
    rng = random.Random(seed)
    rows: list[Row] = []
    for launch in range(count):
        kernel = f"void gemm<{launch % 3}, float>(T1, int, int)"
        rows.append((pid, launch, kernel, "gpc__cycles_elapsed.max", "cycle", thousands(rng.uniform(1e3, 5e7))))
        rows += [(pid, launch, kernel, m, "%", f"{rng.uniform(0, 100):.2f}") for m in PIPES.values()]
    return rows


def test_generated_details_match_reference_and_last_kernel_counts(tmp_path: Path) -> None:
    rows = simple_rows(12)
    # The last launch is the heaviest and has an extreme FMA value: skipping it would change the mean a lot.
    rows = [r for r in rows if r[1] != 11] + [(4242, 11, "last", "gpc__cycles_elapsed.max", "cycle", "90,000,000"),
                                              (4242, 11, "last", PIPES["fma"], "%", "99.50")]
    path = write_details(tmp_path / "p.csv", rows, preamble="==PROF== Connected to process 4242\n")
    launches = ref_details(path)
    assert_means_match(path, launches)
    result = analyze_file(path)
    without_last = ref_mean([v for k, v in launches.items() if k[1] != 11], PIPES["fma"], "gpc__cycles_elapsed.max")
    assert not close(result.cores["fma"].value, without_last)
    assert result.launches == 12


def test_thousands_separators_in_weights_and_values(tmp_path: Path) -> None:
    rows = [(1, 0, "k", "gpc__cycles_elapsed.max", "cycle", "1,000,000"), (1, 0, "k", PIPES["fma"], "%", "10"),
            (1, 1, "k", "gpc__cycles_elapsed.max", "cycle", "3,000,000.00"), (1, 1, "k", PIPES["fma"], "%", "50"),
            (1, 1, "k", "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "1,000.5")]
    path = write_details(tmp_path / "p.csv", rows)
    # The reader parses the separators; coreutil then refuses 1000.5 as a percentage of peak.
    assert read_ncu_csv(path).iloc[1]["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(1000.5)
    with pytest.raises(UsageError, match=r"1000.5 % .* is not a utilization between 0 and 100 %"):
        analyze_file(path)
    result = analyze_file(write_details(tmp_path / "q.csv", rows[:-1]))
    assert result.cores["fma"].value == pytest.approx((10 * 1e6 + 50 * 3e6) / 4e6)


def test_processes_reusing_ids_are_separate_launches(tmp_path: Path) -> None:
    rows = simple_rows(5, pid=100, seed=1) + simple_rows(5, pid=200, seed=2) + simple_rows(3, pid=7, seed=3)
    path = write_details(tmp_path / "p.csv", rows)
    launches = ref_details(path)
    assert len(launches) == 13
    assert_means_match(path, launches)
    frame = read_ncu_csv(path)
    assert frame.index.names == ["Process ID", "ID"]
    assert list(frame.index) == sorted(launches)


def test_duration_weights_are_rescaled_per_row(tmp_path: Path) -> None:
    # Same durations printed in every unit ncu uses: 2 us, 3000 ns, 0.005 ms, 1 us, 0.000002 s.
    durations = [("usecond", "2"), ("nsecond", "3,000"), ("msecond", "0.005"), ("us", "1"), ("second", "0.000002")]
    rows: list[Row] = []
    for launch, (unit, text) in enumerate(durations):
        rows += [(1, launch, "k", "gpu__time_duration.sum", unit, text),
                 (1, launch, "k", PIPES["tensor"], "%", str(10 * (launch + 1)))]
    path = write_details(tmp_path / "p.csv", rows)
    result = analyze_file(path)
    assert result.weight == "gpu__time_duration.sum"
    ns = [2000, 3000, 5000, 1000, 2000]
    expected = sum(w * 10 * (i + 1) for i, w in enumerate(ns)) / sum(ns)
    assert result.cores["tensor"].value == pytest.approx(expected)
    assert close(result.cores["tensor"].value, ref_means(ref_details(path))[PIPES["tensor"]])
    assert read_ncu_csv(path)["gpu__time_duration.sum"].tolist() == pytest.approx(ns)


@pytest.mark.parametrize("present", range(5))
def test_weight_preference_order(tmp_path: Path, present: int) -> None:
    """Each weight metric is used only when the ones before it are absent; none at all means equal weights."""
    names = REF_WEIGHTS[present:]
    rows: list[Row] = []
    for launch in range(3):
        rows += [(1, launch, "k", name, "cycle", str((launch + 1) * (i + 2))) for i, name in enumerate(names)]
        rows.append((1, launch, "k", PIPES["sfu"], "%", str(launch * 30)))
    path = write_details(tmp_path / "p.csv", rows)
    result = analyze_file(path)
    assert result.weight == (names[0] if names else "equal")
    assert_means_match(path, ref_details(path))


def test_missing_values_and_weights_leave_launches_out(tmp_path: Path) -> None:
    rows = [(1, 0, "k", "gpc__cycles_elapsed.max", "cycle", "100"), (1, 0, "k", PIPES["fma"], "%", "n/a"),
            (1, 0, "k", PIPES["fp16"], "%", "40"),
            (1, 1, "k", "gpc__cycles_elapsed.max", "cycle", "300"), (1, 1, "k", PIPES["fma"], "%", "20"),
            (1, 1, "k", PIPES["fp16"], "%", "80"),
            (1, 2, "k", PIPES["fma"], "%", "90"), (1, 2, "k", PIPES["fp16"], "%", "90")]  # no weight
    result = analyze_file(write_details(tmp_path / "p.csv", rows))
    assert result.cores["fma"].value == pytest.approx(20.0)  # only launch 1 has both
    assert result.cores["fp16"].value == pytest.approx((40 * 100 + 80 * 300) / 400)
    assert result.cores["tensor"].value is None and result.cores["tensor"].metric is None
    assert result.launches == 3


def test_all_weights_zero_gives_no_value(tmp_path: Path) -> None:
    rows = [(1, 0, "k", "gpc__cycles_elapsed.max", "cycle", "0"), (1, 0, "k", PIPES["fma"], "%", "10")]
    result = analyze_file(write_details(tmp_path / "p.csv", rows))
    assert result.cores["fma"].value is None and result.cores["fma"].metric == PIPES["fma"]


def test_old_header_ragged_rule_rows_and_trailing_output(tmp_path: Path) -> None:
    rows = simple_rows(4)
    header = [*HEADER_2021, "Rule Name", "Rule Type", "Rule Description"]

    def ragged(fields: list[str]) -> list[str]:  # metric rows stop early, like the real 2022 files
        return fields[:-3]

    path = write_details(tmp_path / "p.csv", rows, header=header, extra=ragged,
                         tail='"3","4242","python3","127.0.0.1","k","t","1","7","Occupancy","","","","Rule","WRN",'
                              '"Occupancy, limited by registers"\n==PROF== Disconnected from process 4242\n')
    launches = ref_details(path)
    assert_means_match(path, launches)


def test_rows_longer_than_the_header(tmp_path: Path) -> None:
    path = write_details(tmp_path / "p.csv", simple_rows(3), extra=lambda f: [*f, "extra", "fields"])
    assert_means_match(path, ref_details(path))


@pytest.mark.parametrize(
    "preamble",
    [
        "",
        "\ufeff",
        "2 2 2\n==PROF== Target process 1 terminated before first instrumented API call.\n",
        'app says "hello, world\n\n==WARNING== odd\n',  # an unbalanced quote before the header
        "epoch 1\r 50%\r100%\n==PROF== Connected\n",  # progress-bar carriage returns
    ],
)
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_preambles_and_line_endings(tmp_path: Path, preamble: str, newline: str) -> None:
    path = write_details(tmp_path / "p.csv", simple_rows(6), preamble=preamble, newline=newline)
    launches = ref_details(path) if not preamble.startswith("\ufeff") else ref_details(_strip_bom(path, tmp_path))
    assert len(launches) == 6
    assert_means_match(path, launches)


def _strip_bom(path: Path, tmp_path: Path) -> Path:
    plain = tmp_path / "plain.csv"
    plain.write_bytes(path.read_bytes().removeprefix(b"\xef\xbb\xbf"))
    return plain


def test_first_row_of_a_duplicated_metric_wins(tmp_path: Path) -> None:
    rows = [(1, 0, "k", PIPES["fma"], "%", "10"), (1, 0, "k", PIPES["fma"], "%", "70")]
    assert analyze_file(write_details(tmp_path / "p.csv", rows)).cores["fma"].value == 10.0


def test_kernel_names_with_commas_and_quotes(tmp_path: Path) -> None:
    name = 'void f<"a, b">(int, float) [lambda(int) (instance 1)]'
    rows = [(1, 0, name, PIPES["fma"], "%", "10"), (1, 1, "other", PIPES["fma"], "%", "30")]
    result = analyze_file(write_details(tmp_path / "p.csv", rows))
    assert set(result.per_kernel.index) == {name, "other"}


CORE_NAMING = [
    # (GPU generation, metric bases present, expected metric per core)
    ("7.0/8.0 as the original", ["sm__inst_executed_pipe_fma", "sm__inst_executed_pipe_fp16",
                                 "sm__inst_executed_pipe_tensor", "sm__inst_executed_pipe_xu"],
     {"fma": "sm__inst_executed_pipe_fma", "fp16": "sm__inst_executed_pipe_fp16",
      "tensor": "sm__inst_executed_pipe_tensor", "sfu": "sm__inst_executed_pipe_xu"}),
    ("8.6+", ["sm__inst_executed_pipe_fma", "sm__inst_executed_pipe_fma_type_fp16", "sm__pipe_tensor_cycles_active",
              "sm__inst_executed_pipe_xu"],
     {"fma": "sm__inst_executed_pipe_fma", "fp16": "sm__inst_executed_pipe_fma_type_fp16",
      "tensor": "sm__pipe_tensor_cycles_active", "sfu": "sm__inst_executed_pipe_xu"}),
    ("8.9 _v2", ["sm__pipe_fma_cycles_active", "sm__pipe_tensor_cycles_active_v2"],
     {"fma": "sm__pipe_fma_cycles_active", "fp16": None, "tensor": "sm__pipe_tensor_cycles_active_v2", "sfu": None}),
    ("9.0 hmma cycles before wgmma instructions", ["sm__inst_executed_pipe_tensor_op_gmma",
                                                   "sm__pipe_tensor_op_hmma_cycles_active"],
     {"fma": None, "fp16": None, "tensor": "sm__pipe_tensor_op_hmma_cycles_active", "sfu": None}),
    ("10.x subpipe", ["sm__pipe_tensor_subpipe_hmma_cycles_active"],
     {"fma": None, "fp16": None, "tensor": "sm__pipe_tensor_subpipe_hmma_cycles_active", "sfu": None}),
]


@pytest.mark.parametrize(("generation", "bases", "expected"), CORE_NAMING, ids=[c[0] for c in CORE_NAMING])
def test_core_metric_names_per_generation(tmp_path: Path, generation: str, bases: list[str],
                                          expected: dict[str, str | None]) -> None:
    rows = [(1, 0, "k", base + ELAPSED, "%", str(10 + i)) for i, base in enumerate(bases)]
    result = analyze_file(write_details(tmp_path / "p.csv", rows))
    for core, base in expected.items():
        assert result.cores[core].metric == (base + ELAPSED if base else None), (generation, core)
        assert result.cores[core].value == (10 + bases.index(base) if base else None)


def test_elapsed_preferred_over_active(tmp_path: Path) -> None:
    rows = [(1, 0, "k", "sm__pipe_tensor_cycles_active" + ACTIVE, "%", "80"),
            (1, 0, "k", "sm__inst_executed_pipe_tensor_op_hmma" + ELAPSED, "%", "30")]
    result = analyze_file(write_details(tmp_path / "p.csv", rows))
    assert result.cores["tensor"].metric == "sm__inst_executed_pipe_tensor_op_hmma" + ELAPSED
    only_active = [(1, 0, "k", "sm__pipe_tensor_cycles_active" + ACTIVE, "%", "80")]
    result = analyze_file(write_details(tmp_path / "q.csv", only_active))
    assert result.cores["tensor"].metric == "sm__pipe_tensor_cycles_active" + ACTIVE


def test_per_kernel_table_matches_reference(tmp_path: Path) -> None:
    path = write_details(tmp_path / "p.csv", simple_rows(30, seed=5))
    launches = ref_details(path)
    table = analyze_file(path).per_kernel
    for core, metric in PIPES.items():
        for kernel, (count, share, mean) in ref_per_kernel(launches, metric).items():
            assert table.loc[kernel, "launches"] == count
            assert close(table.loc[kernel, "weight_share"], share)
            assert close(table.loc[kernel, core], mean)


def write_raw(path: Path, launches: list[tuple[int, int, str, dict[str, str]]], units: dict[str, str] | None,
              preamble: str = "==PROF== Connected to process 9\n") -> Path:
    metrics = sorted({m for *_, values in launches for m in values})
    header = ["ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream", "Block Size",
              "Grid Size", "Device", "CC", *metrics]
    with path.open("w", newline="") as handle:
        handle.write(preamble)
        writer = csv.writer(handle, quoting=csv.QUOTE_ALL, lineterminator="\n")
        writer.writerow(header)
        if units is not None:
            writer.writerow([""] * 11 + [units.get(m, "") for m in metrics])
        for pid, launch, kernel, values in launches:
            writer.writerow([str(launch), str(pid), "p", "h", kernel, "1", "7", "(1, 1, 1)", "(1, 1, 1)", "0", "9.0",
                             *(values.get(m, "") for m in metrics)])
    return path


@pytest.mark.parametrize("with_units", [True, False])
def test_generated_raw_page_matches_reference(tmp_path: Path, with_units: bool) -> None:
    rng = random.Random(3)
    launches = []
    for pid in (5, 6):
        for launch in range(7):
            values = {PIPES[c]: f"{rng.uniform(0, 100):.2f}" for c in ("fma", "sfu")}
            values["gpu__time_duration.sum"] = f"{rng.uniform(1, 900):,.3f}"
            if launch != 3:
                values["sm__pipe_tensor_cycles_active" + ELAPSED] = f"{rng.uniform(0, 100):.2f}"
            launches.append((pid, launch, f"kern{launch % 2}", values))
    units = {"gpu__time_duration.sum": "usecond"} if with_units else None
    path = write_raw(tmp_path / "raw.csv", launches, units)
    reference = ref_raw(path)
    assert_means_match(path, reference)
    result = analyze_file(path)
    assert result.source == "ncu-raw" and result.launches == 14
    frame = read_profile(path)
    scale = 1000.0 if with_units else 1.0
    assert frame.loc[(5, 0), "gpu__time_duration.sum"] == pytest.approx(
        float(launches[0][3]["gpu__time_duration.sum"].replace(",", "")) * scale)


def write_nvprof(path: Path, rows: list[tuple[str, str, int, str, str]]) -> Path:
    lines = ["==1== NVPROF is profiling process 1, command: ./app", "==1== Metric result:",
             '"Device","Kernel","Invocations","Metric Name","Metric Description","Min","Max","Avg"']
    lines += [f'"{d}","{k}",{n},"{m}","desc","{v}","{v}","{v}"' for d, k, n, m, v in rows]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_generated_nvprof_weighted_by_invocations(tmp_path: Path) -> None:
    rows = [("V100 (0)", "a(int)", 10, "single_precision_fu_utilization", "Low (2)"),
            ("V100 (0)", "a(int)", 10, "tensor_precision_fu_utilization", "Idle (0)"),
            ("V100 (0)", "b(float, int)", 30, "single_precision_fu_utilization", "Mid (6)"),
            ("V100 (0)", "b(float, int)", 30, "tensor_precision_fu_utilization", "Max (10)"),
            ("V100 (0)", "b(float, int)", 30, "half_precision_fu_utilization", "High (8)"),
            ("V100 (0)", "b(float, int)", 30, "issue_slot_utilization", "26.8%")]
    result = analyze_file(write_nvprof(tmp_path / "n.csv", rows))
    assert result.launches == 40 and result.weight == "invocations"
    assert result.cores["fma"].value == pytest.approx((20 * 10 + 60 * 30) / 40)
    assert result.cores["tensor"].value == pytest.approx((0 * 10 + 100 * 30) / 40)
    assert result.cores["fp16"].value == pytest.approx(80.0)  # only b has it
    assert result.cores["sfu"].value is None
    frame = read_nvprof_csv(tmp_path / "n.csv")
    assert frame.attrs["units"]["single_precision_fu_utilization"] == "level"


def test_header_without_launches_and_table_without_metrics(tmp_path: Path) -> None:
    empty_table = write_details(tmp_path / "e.csv", [])
    with pytest.raises(UsageError, match="no kernel launches"):
        analyze_file(empty_table)
    no_metrics = write_details(tmp_path / "n.csv", [(1, 0, "k", "dram__bytes.sum", "byte", "1,024")])
    with pytest.raises(UsageError, match="none of the utilization metrics"):
        analyze_file(no_metrics)


# --------------------------------------------------------------------------------------------------------------
# Random profiles against the reference.

METRIC_POOL = [*PIPES.values(), "sm__throughput.avg.pct_of_peak_sustained_elapsed", *REF_WEIGHTS]
UNITS = {"gpu__time_duration.sum": ["nsecond", "usecond", "msecond", "ns", "us", "ms"]}

value_text = st.one_of(
    st.floats(0, 1e9, allow_nan=False).map(lambda v: f"{v:,.2f}"),
    st.integers(0, 10**12).map(lambda v: f"{v:,}"),
    st.integers(0, 100).map(str),
    st.just("n/a"),
)
# Percentages of peak stay within 0-100 (coreutil refuses others); weights take any size.
pct_text = st.one_of(
    st.floats(0, 100, allow_nan=False).map(lambda v: f"{v:,.2f}"),
    st.integers(0, 100).map(str),
    st.just("n/a"),
)
launch_rows = st.lists(
    st.sampled_from(METRIC_POOL).flatmap(
        lambda metric: st.tuples(st.just(metric), st.sampled_from(range(6)),
                                 pct_text if "pct_of_peak" in metric else value_text)),
    min_size=0, max_size=6,
)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])  # as conftest's
@given(
    launches=st.dictionaries(
        st.tuples(st.sampled_from([11, 22, 33]), st.integers(0, 40)),
        st.tuples(st.sampled_from(["k1", "k, 2", 'k "3"']), launch_rows),
        min_size=1,
        max_size=12,
    ),
    shuffle_seed=st.integers(0, 3),
)
def test_random_profiles_match_reference(tmp_path: Path, launches: dict, shuffle_seed: int) -> None:
    rows: list[Row] = []
    for (pid, launch), (kernel, metrics) in launches.items():
        rows.append((pid, launch, kernel, PIPES["fma"], "%", "1"))  # every launch has at least one utilization
        for metric, unit_choice, text in metrics:
            units = UNITS.get(metric, ["%" if "pct" in metric else "cycle"])
            rows.append((pid, launch, kernel, metric, units[unit_choice % len(units)], text))
    if shuffle_seed:  # ncu writes a launch's rows together, but nothing here may depend on it
        random.Random(shuffle_seed).shuffle(rows)
    path = write_details(tmp_path / "random.csv", rows)
    reference = ref_details(path)
    assert_means_match(path, reference)
    per_kernel = analyze_file(path).per_kernel
    for kernel, (count, share, mean) in ref_per_kernel(reference, PIPES["fma"]).items():
        assert per_kernel.loc[kernel, "launches"] == count
        assert close(per_kernel.loc[kernel, "weight_share"], share)
        assert close(per_kernel.loc[kernel, "fma"], mean)


@pytest.mark.parametrize("name", [
    *DETAILS_FIXTURES,
    "ncu_raw_b200_2025_prof_prefix_meinie_flashinfer_decode_2kernels.csv",
    "nvprof_metrics_all_gtx1080ti_magus_matrixMul.csv",
])
def test_gzipped_profile_reads_like_the_original(name: str, tmp_path: Path) -> None:
    """Archived profiles (batch_X.csv.gz) are analysed as they are, whatever their preamble."""
    import gzip

    path = fixture(name)
    packed = tmp_path / (name + ".gz")
    packed.write_bytes(gzip.compress(path.read_bytes()))
    plain, archived = analyze_file(path), analyze_file(packed)
    assert archived.launches == plain.launches and archived.source == plain.source
    assert archived.metrics.equals(plain.metrics)


def test_truncated_gzip_is_a_usage_error(tmp_path: Path) -> None:
    import gzip

    packed = gzip.compress(fixture(DETAILS_FIXTURES[0]).read_bytes())
    cut = tmp_path / "cut.csv.gz"
    cut.write_bytes(packed[: len(packed) // 2])
    with pytest.raises(UsageError, match="damaged gzip data"):
        analyze_file(cut)
