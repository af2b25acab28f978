"""The cost columns read the method-overhead benchmark's rows, never a mix with the runs' own clocks."""

from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from tta.reporting.overhead import apply_overhead


def test_benchmark_rows_replace_the_runs_ms_per_query(tmp_path):
    rows = tmp_path / "overhead.jsonl"
    rows.write_text("".join(json.dumps(r) + "\n" for r in [
        {"model": "xpool", "config": "source", "task": "v2t", "ms_per_query": 10.0, "machine": "cpu X"},
        {"model": "xpool", "config": "hatvtr", "task": "v2t", "ms_per_query": 90.0, "ratio": 7.0,
         "machine": "cpu X"}]))
    runs = pd.DataFrame({"model": ["xpool"] * 3, "config": ["source", "hatvtr", "tent"], "task": ["v2t"] * 3,
                         "ms_per_query": [18.2, 15.3, 40.0]})
    out = apply_overhead(runs, rows)
    # hatvtr: source's ms/query times its paired ratio (its own median came from other passes than source's)
    assert list(out["ms_per_query"][:2]) == [10.0, 70.0] and math.isnan(out["ms_per_query"][2])  # tent: not measured
    assert list(out["cost_machine"][:2]) == ["cpu X", "cpu X"]
    assert runs["ms_per_query"][0] == 18.2  # the caller's frame is not changed


def test_missing_or_foreign_rows_are_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="method_overhead.py"):
        apply_overhead(pd.DataFrame(), tmp_path / "none.jsonl")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"model": "xpool", "R@1": 3.0}) + "\n")
    with pytest.raises(ValueError, match="not rows of"):
        apply_overhead(pd.DataFrame(), other)
