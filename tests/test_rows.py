"""The results row (suite.driver.rows.Row): typed, and what results.json holds, key for key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.driver.rows import Row, blank_row

RESULTS = Path(__file__).resolve().parent.parent / "results"


def test_a_row_round_trips_through_its_dict():
    row = Row(problem="vector", valid=True)
    row.update(ci95=0.001, job=3)
    data = row.to_dict()
    assert list(data)[-2:] == ["ci95", "job"]  # the optional columns in the order set
    assert "median_ms" in data and "launch" not in data  # every fixed column; an optional one only once set
    assert Row.from_dict(data).to_dict() == data
    with pytest.raises(AttributeError, match="no column"):
        row.update(not_a_column=1)
    with pytest.raises(AttributeError, match="no column"):
        row.not_a_column = 1


def test_committed_results_load_and_write_back_unchanged():
    """Every row of every committed results.json, read into a Row and written back: the same keys, in the same
    order, with the same values (a key this record does not know is kept as it was)."""
    files = sorted(RESULTS.rglob("results.json"))
    if not files:
        pytest.skip("no committed results")
    for path in files:
        data = json.loads(path.read_text())
        for row in data["rows"] if isinstance(data, dict) else data:
            back = Row.from_dict(row).to_dict()
            assert back == row and list(back) == list(row), path


def test_blank_row_has_every_fixed_column_then_the_fields_given():
    row = blank_row(problem="gemm", placeholder=True)
    assert list(row)[:2] == ["problem", "shape"] and row["placeholder"] is True and row["samples"] == 0
