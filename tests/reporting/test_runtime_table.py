"""Runtime rows (tta/reporting/runtime.py): the paper's figures and ours in the same columns, each row naming its
source; a row without one is refused."""

from __future__ import annotations

import json

import pytest

from tta.reporting.pages import render_tables


def _rows(tmp_path, rows):
    path = tmp_path / "runtime.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_paper_and_measured_rows_share_the_columns(tmp_path):
    path = _rows(tmp_path, [
        {"source": "paper, Table 9", "card": "RTX 4090", "method": "hatvtr", "ms_per_query": 32.27, "hsm_ms": 4.2},
        {"source": "hsm_timing", "card": "H200", "method": "hatvtr", "task": "v2t", "ms_per_query": 19.08,
         "hsm_ms": 0.34, "stream_s": 12.0}])
    (table,) = render_tables([path], layout="runtime")
    md = table.to_markdown()
    header = next(line for line in md.splitlines() if line.startswith("| source"))
    assert header.split(" | ")[5:] == ["total", "HSM", "seconds |"]  # only the columns some row fills
    assert "| paper, Table 9 | RTX 4090 | hatvtr |  |  | 32.27 | 4.20 |  |" in md
    assert "| hsm_timing | H200 | hatvtr | v2t |  | 19.08 | 0.34 | 12.00 |" in md


def test_a_row_without_its_source_is_refused(tmp_path):
    path = _rows(tmp_path, [{"card": "H200", "method": "source", "ms_per_query": 1.0}])
    with pytest.raises(ValueError, match="names its source"):
        render_tables([path], layout="runtime")
