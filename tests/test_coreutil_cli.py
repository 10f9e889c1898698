"""The coreutil command line: the thin script (run as users run it), ``trainbench coreutil`` and its formats.

Expected figures are worked out by hand below, never taken from the code's own output.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from trainbench.cli import coreutil_cmd

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "Core-Utilization-Analyzer" / "coreutil.py"
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "ncu"
ELAPSED = ".avg.pct_of_peak_sustained_elapsed"
PIPE = {"fma": "fma", "fp16": "fp16", "tensor": "tensor", "sfu": "xu"}

# Three launches (weights 1, 3 and 4 million cycles; the last one counts too):
#   fma    (10*1 + 50*3 + 17.5*4) / 8 = 28.75
#   fp16   (20*1 + 5*4) / 5 = 8           (launch 1 says n/a)
#   tensor (30*1 + 70*3) / 4 = 60         (launch 2 has no tensor row)
#   sfu    (40*1 + 0.5*3 + 1*4) / 8 = 5.6875
LAUNCHES = [
    ("1,000,000", {"fma": "10", "fp16": "20", "tensor": "30", "sfu": "40"}),
    ("3,000,000", {"fma": "50", "fp16": "n/a", "tensor": "70", "sfu": "0.5"}),
    ("4,000,000.00", {"fma": "17.5", "fp16": "5", "sfu": "1"}),
]
EXPECTED_LINES = ["fma\t28.75000 %", "fp16\t8.00000 %", "tensor\t60.00000 %", "sfu\t5.68750 %"]
EXPECTED = {"fma": 28.75, "fp16": 8.0, "tensor": 60.0, "sfu": 5.6875}
HEADER = ('"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size",'
          '"Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"')


def write_profile(path: Path, kernels: tuple[str, ...] = ("gemm(float, int)", "relu", "gemm(float, int)")) -> Path:
    lines = ["==PROF== Connected to process 77 (/usr/bin/python3)", "==PROF== Disconnected from process 77", HEADER]
    for launch, (cycles, pct) in enumerate(LAUNCHES):
        prefix = (f'"{launch}","77","python3","127.0.0.1","{kernels[launch]}","1","7","(1, 1, 1)","(1, 1, 1)",'
                  f'"0","8.0","Command line profiler metrics",')
        lines.append(f'{prefix}"gpc__cycles_elapsed.max","cycle","{cycles}"')
        lines += [f'{prefix}"sm__inst_executed_pipe_{PIPE[core]}{ELAPSED}","%","{v}"' for core, v in pct.items()]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return path


def env_without_pythonpath() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def run_script(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT) if cwd != REPO else "Core-Utilization-Analyzer/coreutil.py",
                           *args], cwd=cwd, env=env_without_pythonpath(), capture_output=True, text=True, timeout=120)


def one_error_line(stderr: str, *fragments: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert "Traceback" not in stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


# --------------------------------------------------------------------------------------------------------------
# Subprocesses, as users run it.


def test_thin_script_from_the_repo_root_without_pythonpath(tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "batch_32.csv")
    result = run_script(str(profile), cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == EXPECTED_LINES
    assert result.stderr == ""


def test_thin_script_from_another_folder_with_a_relative_path(tmp_path: Path) -> None:
    write_profile(tmp_path / "profiled_data_ncu" / "batch_X.csv")
    result = run_script("profiled_data_ncu/batch_X.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == EXPECTED_LINES


def test_thin_script_bad_and_good_files_together(tmp_path: Path) -> None:
    good = write_profile(tmp_path / "good.csv")
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 40)
    result = run_script(str(binary), str(good), cwd=tmp_path)
    assert result.returncode == 2
    one_error_line(result.stderr, "trainbench: coreutil:", str(binary))
    assert result.stdout.splitlines() == [f"==> {good} <==", *EXPECTED_LINES]


def test_trainbench_coreutil_subcommand(tmp_path: Path) -> None:
    profile = write_profile(tmp_path / "p.csv")
    env = {**os.environ, "PYTHONPATH": str(REPO / "source")}
    result = subprocess.run([sys.executable, "-m", "trainbench", "coreutil", str(profile), "--json"], cwd=tmp_path,
                            env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert {core: data["cores"][core]["value"] for core in EXPECTED} == pytest.approx(EXPECTED)


# --------------------------------------------------------------------------------------------------------------
# In process: formats and errors.


def test_several_files_get_a_header_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    first, second = write_profile(tmp_path / "a.csv"), write_profile(tmp_path / "b.csv")
    assert coreutil_cmd.main([str(first), str(second)]) == 0
    assert capsys.readouterr().out.splitlines() == [f"==> {first} <==", *EXPECTED_LINES,
                                                    f"==> {second} <==", *EXPECTED_LINES]


def test_json_object_per_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "a.csv")
    assert coreutil_cmd.main(["--json", str(profile), str(profile)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    data = json.loads(lines[0])
    assert data["file"] == str(profile)
    assert data["kernels"] == 3
    assert data["weight"] == "gpc__cycles_elapsed.max"
    for core, value in EXPECTED.items():
        assert data["cores"][core] == {"value": pytest.approx(value),
                                       "metric": f"sm__inst_executed_pipe_{PIPE[core]}{ELAPSED}"}
    assert data["metrics"][f"sm__inst_executed_pipe_fp16{ELAPSED}"] == pytest.approx(8.0)
    assert "per_kernel" not in data


def test_json_has_null_for_missing_cores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text(f'{HEADER}\n"0","1","p","h","k","1","7","","","0","8.6","S","sm__throughput{ELAPSED}","%","5"\n')
    assert coreutil_cmd.main(["--json", str(profile)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["cores"]["tensor"] == {"value": None, "metric": None}
    assert data["weight"] == "equal"
    assert coreutil_cmd.main([str(profile)]) == 0
    assert capsys.readouterr().out.splitlines() == ["fma\tn/a", "fp16\tn/a", "tensor\tn/a", "sfu\tn/a"]


def test_per_kernel(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "a.csv")
    # gemm: launches 0 and 2, weight 5 of 8 (62.5 %), fma (10*1 + 17.5*4)/5 = 16, fp16 (20+20)/5 = 8,
    # tensor 30 (launch 0 only), sfu (40 + 4)/5 = 8.8; relu: launch 1, 37.5 %, fma 50, fp16 n/a, tensor 70, sfu 0.5
    assert coreutil_cmd.main(["--per-kernel", "5", str(profile)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == EXPECTED_LINES
    assert lines[4].startswith("# top 5 kernels")
    assert lines[5] == "share\tlaunches\tfma\tfp16\ttensor\tsfu\tkernel"
    assert lines[6] == "62.50000 %\t2\t16.00000 %\t8.00000 %\t30.00000 %\t8.80000 %\tgemm(float, int)"
    assert lines[7] == "37.50000 %\t1\t50.00000 %\tn/a\t70.00000 %\t0.50000 %\trelu"
    assert len(lines) == 8
    assert coreutil_cmd.main(["--per-kernel", "1", "--json", str(profile)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["per_kernel"] == [{"kernel": "gemm(float, int)", "launches": 2, "weight_share": pytest.approx(62.5),
                                   "fma": pytest.approx(16.0), "fp16": pytest.approx(8.0),
                                   "tensor": pytest.approx(30.0), "sfu": pytest.approx(8.8)}]


def test_csv_summary_one_row_per_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "a.csv")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    out = tmp_path / "summary.csv"
    assert coreutil_cmd.main([str(profile), str(empty), str(profile), "--csv", str(out)]) == 2
    one_error_line(capsys.readouterr().err, str(empty), "empty file")
    with out.open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row in rows:
        assert row["file"] == str(profile) and row["kernels"] == "3"
        for core, value in EXPECTED.items():
            assert float(row[core]) == pytest.approx(value)
            assert row[f"{core}_metric"] == f"sm__inst_executed_pipe_{PIPE[core]}{ELAPSED}"


def test_csv_summary_leaves_na_empty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "p.csv"
    profile.write_text(f'{HEADER}\n"0","1","p","h","k","1","7","","","0","8.6","S","sm__throughput{ELAPSED}","%","5"\n')
    out = tmp_path / "s.csv"
    assert coreutil_cmd.main([str(profile), "--csv", str(out)]) == 0
    row = next(csv.DictReader(out.open(newline="")))
    assert row["fma"] == "" and row["fma_metric"] == ""


def test_csv_that_cannot_be_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "a.csv")
    target = tmp_path / "no" / "such" / "dir" / "s.csv"
    assert coreutil_cmd.main([str(profile), "--csv", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == EXPECTED_LINES
    one_error_line(captured.err, str(target), "cannot write")


def test_nvprof_output_says_levels_times_ten(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = tmp_path / "n.csv"
    profile.write_text('==1== Metric result:\n"Device","Kernel","Invocations","Metric Name","Metric Description",'
                       '"Min","Max","Avg"\n"V100 (0)","k(int)",4,"single_precision_fu_utilization","d","Low (1)",'
                       '"Mid (5)","Low (3)"\n')
    assert coreutil_cmd.main([str(profile)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#") and "level x 10 %" in lines[0]
    assert lines[1:] == ["fma\t30.00000 %", "fp16\tn/a", "tensor\tn/a", "sfu\tn/a"]


def test_add_parser_and_run_for_the_main_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser = argparse.ArgumentParser(prog="trainbench")
    coreutil_cmd.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["coreutil", str(write_profile(tmp_path / "a.csv")), "--per-kernel", "2"])
    assert args.command == "coreutil" and args.per_kernel == 2 and args.json is False and args.csv is None
    assert coreutil_cmd.run(args) == 0
    assert capsys.readouterr().out.splitlines()[:4] == EXPECTED_LINES


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    (tmp_path / "empty.csv").write_text("")
    (tmp_path / "blank.csv").write_text("\n\n  \n")
    (tmp_path / "adir.csv").mkdir()
    (tmp_path / "binary.csv").write_bytes(b"\x7fELF\x00\x01" + bytes(range(256)) * 8)
    (tmp_path / "prof_only.csv").write_text("==PROF== Connected to process 1\n==ERROR== The application returned "
                                            "an error code (1).\n")
    (tmp_path / "header_only.csv").write_text(HEADER + "\n")
    (tmp_path / "no_metrics.csv").write_text(
        f'{HEADER}\n"0","1","p","h","k","1","7","","","0","8.0","S","dram__bytes.sum","byte","1,024"\n')
    return {
        "empty": (tmp_path / "empty.csv", "empty file"),
        "blank": (tmp_path / "blank.csv", "empty file"),
        "directory": (tmp_path / "adir.csv", "directory"),
        "binary": (tmp_path / "binary.csv", "no ncu or nvprof metrics table"),
        "no table": (tmp_path / "prof_only.csv", "no ncu or nvprof metrics table"),
        "header only": (tmp_path / "header_only.csv", "no kernel launches"),
        "no metrics": (tmp_path / "no_metrics.csv", "none of the utilization metrics"),
        "missing": (tmp_path / "missing.csv", "no such file"),
    }


@pytest.mark.parametrize("case", ["empty", "blank", "directory", "binary", "no table", "header only", "no metrics",
                                  "missing"])
def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    path, problem = _bad_inputs(tmp_path)[case]
    good = write_profile(tmp_path / "good.csv")
    assert coreutil_cmd.main([str(path), str(good)]) == 2
    captured = capsys.readouterr()
    one_error_line(captured.err, f"trainbench: coreutil: {path}: ", problem)
    assert captured.out.splitlines() == [f"==> {good} <==", *EXPECTED_LINES]  # the bad file printed nothing


@pytest.mark.parametrize("argv", [["--per-kernel", "0", "x.csv"], ["--per-kernel", "many", "x.csv"], [],
                                  ["--bogus", "x.csv"]])
def test_bad_options_are_one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    assert coreutil_cmd.main(argv) == 2
    one_error_line(capsys.readouterr().err, "trainbench: coreutil")


def test_control_characters_in_file_names_stay_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad\nname.csv"
    path.write_text("")
    assert coreutil_cmd.main([str(path)]) == 2
    one_error_line(capsys.readouterr().err, "bad\\nname.csv")


@pytest.mark.parametrize(
    "name",
    ["ncu_details_2023_rulecols_leleucas_bert_torch_nsight.csv", "ncu_details_a100_gardenia_gemm.csv",
     "ncu_nocsv_edge_meinie_app_error.csv", "ncu_raw_b200_2025_prof_prefix_meinie_flashinfer_decode_2kernels.csv"],
)
def test_shared_fixtures_through_the_cli(capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = FIXTURES / name
    if not path.is_file():
        pytest.skip(f"shared fixture {name} is absent")
    status = coreutil_cmd.main([str(path)])
    captured = capsys.readouterr()
    if name.startswith(("ncu_details_a100_gardenia", "ncu_nocsv")):
        assert status == 2
        one_error_line(captured.err, str(path))
        assert captured.out == ""
    else:
        assert status == 0 and captured.err == ""
        lines = captured.out.splitlines()
        assert [line.split("\t")[0] for line in lines] == ["fma", "fp16", "tensor", "sfu"]
        if "bert" in name:  # an A100 profile without pipe metrics: n/a, not 0
            assert all(line.endswith("\tn/a") for line in lines)
        else:
            assert lines[2] == "tensor\t0.00000 %"


def test_csv_never_overwrites_an_existing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    profile = write_profile(tmp_path / "a.csv")
    target = tmp_path / "summary.csv"
    target.write_text("earlier results\n")
    assert coreutil_cmd.main([str(profile), "--csv", str(target)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == EXPECTED_LINES
    one_error_line(captured.err, str(target), "not overwritten")
    assert target.read_text() == "earlier results\n"


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_utf16_profiles_read_as_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str], encoding: str) -> None:
    """ncu --csv redirected by PowerShell is UTF-16 (with a byte-order mark: "utf-16"; without: -le, -be)."""
    text = write_profile(tmp_path / "utf8.csv").read_text()
    path = tmp_path / f"{encoding}.csv"
    path.write_bytes(text.encode(encoding))
    assert coreutil_cmd.main([str(path)]) == 0
    assert capsys.readouterr().out.splitlines() == EXPECTED_LINES


def test_damaged_utf16_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "odd.csv"
    path.write_bytes(write_profile(tmp_path / "utf8.csv").read_text().encode("utf-16") + b"\x00\xd8\x41")
    assert coreutil_cmd.main([str(path)]) == 2
    one_error_line(capsys.readouterr().err, f"trainbench: coreutil: {path}: ", "UTF-16")


@pytest.mark.parametrize(("value", "problem"), [
    ("-50", "-50 % (launch 77 1) is not a utilization between 0 and 100 %"),
    ("250", "250 % (launch 77 1) is not a utilization between 0 and 100 %"),
    ("nan", "'nan' (launch 77 1) is not a number"),
    ("1e999", "(launch 77 1) is not a number"),  # read as a float, it says 'inf'
    ("inf", "'inf' (launch 77 1) is not a number"),
])
def test_impossible_utilizations_refuse_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str,
                                                 problem: str) -> None:
    path = write_profile(tmp_path / "good.csv")
    text = path.read_text().replace('"sm__inst_executed_pipe_fma' + ELAPSED + '","%","50"',
                                    '"sm__inst_executed_pipe_fma' + ELAPSED + f'","%","{value}"')
    assert text != path.read_text()
    bad = tmp_path / "bad.csv"
    bad.write_text(text)
    assert coreutil_cmd.main([str(bad)]) == 2
    one_error_line(capsys.readouterr().err, f"trainbench: coreutil: {bad}: sm__inst_executed_pipe_fma", problem)


def test_na_stays_a_missing_value_and_100_is_a_utilization(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write_profile(tmp_path / "good.csv")
    edge = tmp_path / "edge.csv"
    edge.write_text(path.read_text().replace('"%","50"', '"%","100.00"'))
    assert coreutil_cmd.main([str(edge)]) == 0
    # fma: (10*1 + 100*3 + 17.5*4) / 8 = 47.5; fp16 keeps its n/a launch out of the mean, as before
    assert capsys.readouterr().out.splitlines() == ["fma\t47.50000 %", *EXPECTED_LINES[1:]]
