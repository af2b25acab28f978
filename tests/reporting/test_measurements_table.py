"""Benchmark tables (tta/reporting/measurements.py): a benchmark's rows in its own columns, rendered under the command,
commit, date and machine its row file records; a file without them is refused; the benchmark pages of docs/results
render from pages.yaml exactly as committed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tta.report import main as report_main
from tta.reporting.measurements import write_measurements
from tta.reporting.pages import render_pages, render_tables

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
COLUMNS = [{"name": "shift"}, {"name": "clips/s", "format": "{:.2f}", "align": "right"},
           {"name": "ratio", "format": "{:.1f}x", "align": "right"}, {"name": "gallery", "format": "{:,}"}]


def _measured(tmp_path) -> Path:
    rows = [{"cells": {"shift": "gaussian", "clips/s": 159.342, "ratio": 12.31, "gallery": 1000000}, "severity": 3},
            {"cells": {"shift": "h264", "clips/s": 5.5, "gallery": "skipped: over the limit"}, "severity": 3}]
    return write_measurements(tmp_path / "speed.jsonl", COLUMNS, rows, title="Speed", command="python bench.py",
                              machine="2-core test CPU", before=["load average 1.00"], after=["note: x skipped"])


def test_the_layout_renders_a_benchmarks_rows_under_their_provenance(tmp_path, capsys):
    path = _measured(tmp_path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["command"] == "python bench.py" and header["commit"] and header["date"].endswith("UTC")
    (table,) = render_tables([path], layout="measurements")
    lines = table.to_markdown().splitlines()
    assert lines[0].startswith("**Speed** (measured by `python bench.py`, commit ")
    assert lines[0].endswith(f"{header['date']}; 2-core test CPU)")
    assert lines[2:] == ["load average 1.00", "", "| shift | clips/s | ratio | gallery |", "|---|---:|---:|---|",
                         "| gaussian | 159.34 | 12.3x | 1,000,000 |",  # numbers in their column's format
                         "| h264 | 5.50 | — | skipped: over the limit |",  # missing: the header's mark; text as is
                         "", "note: x skipped"]
    assert report_main([str(path), "--layout", "measurements"]) == 0
    assert "| gaussian | 159.34 | 12.3x | 1,000,000 |" in capsys.readouterr().out


def test_a_row_file_without_its_provenance_is_refused_in_one_line(tmp_path, capsys):
    path = _measured(tmp_path)
    header, *rows = path.read_text().splitlines()
    stripped = {k: v for k, v in json.loads(header).items() if k not in ("commit", "machine")}
    path.write_text("\n".join([json.dumps(stripped), *rows]) + "\n")
    assert report_main([str(path), "--layout", "measurements"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "the header record lacks commit, machine" in err
    path.write_text("\n".join(rows) + "\n")  # no header at all
    with pytest.raises(ValueError, match="not a measurement row file"):
        render_tables([path], layout="measurements")


def test_a_cell_outside_the_header_columns_is_refused(tmp_path):
    path = _measured(tmp_path)
    path.write_text(path.read_text() + json.dumps({"cells": {"shift": "fog", "speed": 1.0}}) + "\n")
    with pytest.raises(ValueError, match=r"speed\.jsonl:4: .*unknown: speed"):
        render_tables([path], layout="measurements")


#: the pages whose every table is a benchmark's (layout measurements): cheap to render, checked in full here
BENCHMARK_PAGES = [name for name, page in yaml.safe_load((RESULTS / "pages.yaml").read_text()).items()
                   if all(t.get("layout") == "measurements" for t in page["tables"])]


def test_the_benchmark_pages_render_from_pages_yaml_as_committed(tmp_path):
    assert {"shift-speed", "scale", "first-run-time", "gallery-encoding"} <= set(BENCHMARK_PAGES)
    spec = tmp_path / "pages.yaml"
    shutil.copy(RESULTS / "pages.yaml", spec)
    (tmp_path / "rows").symlink_to(RESULTS / "rows")
    for page in render_pages(spec, BENCHMARK_PAGES, date="2026-11-28"):
        committed = (RESULTS / page.name).read_text().splitlines()
        rendered = page.read_text().splitlines()
        # the same bytes, but for where the spec lives, the rows' commit links (git log) and the rendering date
        volatile = ("| rendered by", "| rows", "| rendered on")
        assert [x for x in rendered if not x.startswith(volatile)] == \
               [x for x in committed if not x.startswith(volatile)], f"re-render {page.name}"
        assert len(rendered) == len(committed)
