"""The comp layout of tta.report: the VideoComp probe of a task=comp run and of a stream run that scored it
(results.json "comp"), from the sweep directory and from the row file it exports, to the same tables."""

from __future__ import annotations

import json

import numpy as np

from tests.reporting.synthetic_runs import write_run
from tta.report import main as report_main
from tta.reporting.collect import export_rows, load_runs
from tta.reporting.pages import render_tables

TYPES = ("temp_reorder", "action_replace", "seg_mismatch")


def probe(acc: tuple[float, float, float], margin: float = 0.001) -> dict:
    """One model's probe result as tta.comp.probe.score_probe and add_intervals write it."""
    return {"accuracy": dict(zip(TYPES, acc, strict=True)), "triplets": dict(zip(TYPES, (300, 300, 600), strict=True)),
            "margin": dict.fromkeys(TYPES, margin), "outcomes": {t: [1, 0, 1] for t in TYPES},
            "comprehensive": float(np.prod(acc) / 1e4), "chance_comprehensive": 12.5, "R@1_t2v": 54.3,
            "R@1_v2t": 50.0, "n_videos": 300, "accuracy_ci": {t: [a - 5.0, a + 5.0] for t, a in zip(TYPES, acc, strict=True)},
            "comprehensive_ci": [16.7, 22.3]}


SOURCE = probe((54.3, 62.7, 56.8), margin=0.00092)
CONFIG = {"model": {"name": "clip4clip_seqtransf"}, "data": {"name": "synth_comp"},
          "embedded_recipe": ["comp_loss.weight=1"], "comp_probe": {"data_overrides": []}, "seed": 42}


def write_comp_runs(root):
    """A task=comp run of the source and a t2v stream whose adapted model lost action accuracy (interval < 0)."""
    d = root / "comp"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps({
        "task": "comp", "model": "clip4clip_seqtransf", "data": "synth_comp", "source_weights": "e26f19a81d301d7f",
        "comp": {"data": "synth_comp", "seed": 0, "source": SOURCE}, "config": CONFIG}))
    run = write_run(root, adapter="tcr", shift="ocr", severity=7, task="t2v", model="clip4clip_seqtransf",
                    ranks=[1, 2, 1, 3], source_weights="e26f19a81d301d7f", config=CONFIG)
    res = json.loads((run / "results.json").read_text())
    diff = {"of": "adapted - source", "temp_reorder": {"delta": 2.3, "ci": [-1.7, 6.3]},
            "action_replace": {"delta": -4.0, "ci": [-8.0, -0.3]}, "seg_mismatch": {"delta": 1.2, "ci": [-1.0, 3.5]},
            "comprehensive": {"delta": -0.1, "ci": [-2.1, 1.9]}}
    res["comp"] = {"data": "synth_comp", "seed": 0, "adapted": probe((56.7, 58.7, 58.0)), "source": SOURCE,
                   "difference": diff}
    (run / "results.json").write_text(json.dumps(res))


def test_comp_layout_renders_the_source_probe_and_the_paired_differences_from_runs_and_rows(tmp_path):
    write_comp_runs(tmp_path / "sweep")
    tables = render_tables([tmp_path / "sweep"], layout="comp")
    source, stream = (t.to_markdown() for t in tables)
    # the task=comp run and the stream's source block are one source model: one row, with its intervals
    assert source.count("| clip4clip_seqtransf, recipe [comp_loss.weight=1] |") == 1
    assert "| 54.3 [49.3, 59.3] | 62.7 [57.7, 67.7] | 56.8 [51.8, 61.8] |" in source
    assert "0.92 / 0.92 / 0.92" in source
    assert "after adaptation, source clip4clip_seqtransf, recipe [comp_loss.weight=1]" in stream
    assert "| t2v ocr s7 | tcr | 50.0 | 56.7 [51.7, 61.7] |" in stream
    assert "| +2.3 [−1.7, +6.3] | −4.0 [−8.0, −0.3] ▼ |" in stream  # marked only where the interval excludes 0
    # the row file keeps the probe (without the per-triplet outcomes) and renders the same tables
    rows = export_rows(load_runs([tmp_path / "sweep"])[0], tmp_path / "comp.jsonl")
    assert all("outcomes" not in json.dumps(json.loads(line)["comp"]) for line in rows.read_text().splitlines())
    again = render_tables([rows], layout="comp")
    assert [t.to_markdown() for t in again] == [source, stream]


def test_comp_layout_cli_writes_rows_and_refuses_runs_without_a_probe(tmp_path, capsys):
    write_comp_runs(tmp_path / "sweep")
    rows = tmp_path / "rows.jsonl"
    assert report_main([str(tmp_path / "sweep"), "--layout", "comp", "--rows", str(rows)]) == 0
    assert "VideoComp probe of the source models" in capsys.readouterr().out and rows.exists()
    write_run(tmp_path / "plain", ranks=[1, 2])
    assert report_main([str(tmp_path / "plain"), "--layout", "comp"]) == 2
    assert "no run here carries a VideoComp probe" in capsys.readouterr().err
