"""benchmarks/first_run.py: the stages are cut at the set-up display's log lines and each gets the CPU samples
inside it; on the tiny recipe the whole first run is split into its stages. Times are printed, never asserted."""

from __future__ import annotations

import datetime as dt

import pytest

from benchmarks import first_run

LOG = """\
[2026-11-26 05:39:09,847][tta.progress][INFO] - first use: 3 set-up stages (a, b, c), about 6 min on a 2-core CPU
[2026-11-26 05:39:10,000][tta.progress][INFO] - set-up 0 % · stage 1/3: rendering the pretraining corpus · ETA unknown
[2026-11-26 05:39:12,000][tta.progress][INFO] - pretraining corpus: done, 6000 items in 2.0 s
[2026-11-26 05:39:14,000][tta.progress][INFO] - set-up 2 % · stage 2/3: pretraining the embedded CLIP · ETA unknown
[2026-11-26 05:39:24,000][tta.progress][INFO] - set-up 30 % · stage 2/3: pretraining the embedded CLIP · about 2 min left
[2026-11-26 05:39:30,000][tta.progress][INFO] - set-up 50 % · stage 3/3: fine-tuning clip4clip on synth · about 1 min left
GPU available: False, used: False
[2026-11-26 05:39:40,000][tta.progress][INFO] - set-up done in 30 s
"""


def _t(clock: str) -> float:
    return dt.datetime.strptime(f"2026-11-26 {clock}", "%Y-%m-%d %H:%M:%S").timestamp()


def test_stages_are_cut_at_their_first_line_and_get_their_samples():
    events = first_run.log_events(LOG.splitlines())
    assert [name for _, name in events] == [
        "start-up (imports, config, planning)", "rendering the pretraining corpus", "pretraining the embedded CLIP",
        "fine-tuning clip4clip on synth", "the run (test data, stream, scores)"]
    start, end = _t("05:39:05"), _t("05:39:45")
    # one sample per second: 1 core busy before 05:39:14, 2 cores from then on
    samples = [(start + s, 1.0 if start + s <= _t("05:39:14") else 2.0) for s in range(1, 41)]
    rows = first_run.stage_table(events, samples, start, end, cores=2)
    assert [r["stage"] for r in rows] == [name for _, name in events]
    walls = [round(r["wall_s"], 3) for r in rows]
    assert walls == [5.0, 4.0, 16.0, 10.0, 5.0] and sum(walls) == pytest.approx(end - start)
    assert [r["busy_cores"] for r in rows] == [1.0, 1.0, 2.0, 2.0, 2.0]
    assert [round(r["idle_core_s"], 3) for r in rows] == [5.0, 4.0, 0.0, 0.0, 0.0]


def test_a_stage_without_samples_has_no_cpu_figures():
    events = first_run.log_events(LOG.splitlines())
    rows = first_run.stage_table(events, [], _t("05:39:05"), _t("05:39:45"), cores=2)
    assert all(r["busy_cores"] is None and r["idle_core_s"] is None for r in rows)


def test_cpu_counters_read_the_machine():
    counters = first_run.cpu_counters()
    if counters is None:
        pytest.skip("no /proc/stat here")
    total, idle = counters
    assert 0 <= idle <= total


def test_tiny_first_run_splits_into_its_stages(tmp_path, capsys):
    rows = first_run.main(["--cache", str(tmp_path / "cache"), "--out", str(tmp_path / "out"), "--every", "0.2",
                          "debug=tiny"])
    names = [r["stage"] for r in rows]
    assert names[0].startswith("start-up") and names[-1].startswith("the run")
    assert "pretraining the embedded CLIP" in names and any(n.startswith("fine-tuning") for n in names)
    assert all(r["wall_s"] > 0 for r in rows)
    assert "| **total** |" in capsys.readouterr().out


def test_a_used_cache_is_refused(tmp_path):
    (tmp_path / "x").write_text("")
    with pytest.raises(SystemExit, match="not empty"):
        first_run.main(["--cache", str(tmp_path)])


def test_the_stage_table_becomes_a_row_file_that_renders(tmp_path):
    from tta.reporting.pages import render_tables

    stages = [{"stage": "start-up (imports, config, planning)", "wall_s": 5.6, "busy_cores": 1.06, "idle_core_s": 5.2},
              {"stage": "rendering synth", "wall_s": 36.2, "busy_cores": None, "idle_core_s": None}]
    path = first_run.write_rows(tmp_path / "first-run.jsonl", stages, 49.1, "python benchmarks/first_run.py")
    (table,) = render_tables([path], layout="measurements")
    lines = table.to_markdown().splitlines()
    assert lines[0].startswith("**The first run, stage by stage** (measured by `python benchmarks/first_run.py`")
    assert lines[-3:] == ["| start-up (imports, config, planning) | 5.6 | 1.06 | 5.2 |",
                          "| rendering synth | 36.2 | — | — |", "| **total** | **49.1** | | 5.2 |"]
