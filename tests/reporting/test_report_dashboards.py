"""The report's provenance lines, its W&B summary run (``--wandb``, offline) and its HTML page in a real headless
browser (every image loads, every table renders, no console error, a screenshot)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from tests.reporting.headless_browser import INSTALL, Page, chromium
from tests.reporting.wandb_offline import summarize
from tta.report import main as report_main
from tta.reporting.full_report import build_report

COMMIT = "0123456789abcdef0123456789abcdef01234567"
pytestmark = pytest.mark.heavy  # matplotlib plots of a sweep, W&B, Chromium: seconds each


def _fake_sweep(root: Path) -> Path:
    """2 adapters x (clean, gaussian s5) with k-occurrence counts, score heads and provenance."""
    g = torch.Generator().manual_seed(0)
    for i, (adapter, shift) in enumerate([(a, s) for a in ("source", "tent") for s in ("clean", "gaussian")]):
        run = root / f"{adapter}_{shift}"
        run.mkdir(parents=True)
        res = {"data": "synth", "task": "v2t", "scenario": "qs", "model": "clip4clip", "adapter": adapter,
               "posthoc": "none", "shift": shift, "severity": 5 if shift != "clean" else 0, "seed": 42,
               "train_data": "synth", "num_queries": 40,
               "retrieval": {"R@1": 40.0 - 5 * i, "R@5": 70.0, "R@10": 80.0, "R@50": 99.0, "MdR": 2.0, "MnR": 5.0},
               "hubness": {"skewness": 1.0 + i, "k": 10}, "time_s": {"per_query_ms": 1.0},
               "provenance": {"git": {"commit": COMMIT, "dirty": adapter == "tent"},
                              "device": {"type": "cpu", "name": "Test CPU"},
                              "started": f"2026-01-0{i + 1}T10:00:00+00:00",
                              "finished": f"2026-01-0{i + 1}T10:05:00+00:00"}}
        (run / "results.json").write_text(json.dumps(res))
        (run / "k_occurrence.json").write_text(json.dumps({"k": 15, "counts": torch.randint(0, 30, (40,), generator=g).tolist()}))
        torch.save(torch.randn(40, 40, generator=g).half(), run / "sims_head.pt")
    return root


@pytest.fixture
def report(tmp_path):
    pytest.importorskip("matplotlib", reason="the report's plots need the 'report' extra: pip install -e '.[report]'")
    sweep = _fake_sweep(tmp_path / "sweep")
    build_report(sweep, tmp_path / "report")
    return sweep, tmp_path / "report"


def test_report_prints_the_provenance_of_each_table(report, capsys):
    sweep, out = report
    assert report_main([str(sweep), "--out", str(out)]) == 0
    md = (out / "tables.md").read_text()
    line = "provenance: commit 0123456789 (dirty checkout in 2 of 4 runs); device Test CPU; 2026-01-01 10:00 to 2026-01-04 10:05 UTC"
    assert line in md and line in (out / "index.html").read_text()
    assert line in capsys.readouterr().out


def test_report_wandb_summary_run_offline(report, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    sweep, _ = report
    out = tmp_path / "report-wandb"
    assert report_main([str(sweep), "--out", str(out), "--wandb"]) == 0
    [file] = list((out / "wandb").glob("offline-run-*/run-*.wandb"))
    rec = summarize(file)
    assert rec["run"]["job_type"] == "report" and rec["run"]["group"] == "report"
    assert rec["run"]["id"].startswith("report-") and rec["exit_code"] == 0
    logged = {k.split("/_type")[0]: v for h in rec["history"] for k, v in h.items() if k.endswith("/_type")}
    assert logged["tables/00"] == "table-file" and logged["robustness"] == "table-file"
    assert sum(v == "image-file" for k, v in logged.items() if k.startswith("plots/")) >= 3
    assert rec["summary"]["tables/00/provenance"].startswith("provenance: commit 0123456789")
    [art] = [a for a in rec["artifacts"] if a["type"] == "report"]
    assert {"index.html", "tables.md", "tables.csv", "tables.tex"} <= set(art["files"])


def test_report_html_renders_in_headless_chromium(report, tmp_path):
    if chromium() is None:
        pytest.skip(f"no Chromium for the browser test: {INSTALL}")
    _, out = report
    page = Page(tmp_path)
    try:
        page.call("Emulation.setDeviceMetricsOverride", width=1400, height=900, deviceScaleFactor=1, mobile=False)
        page.open((out / "index.html").resolve().as_uri())
        # the page is 1400 px wide; the robustness tables fit it whole, with words for headers
        page_width = page.evaluate("document.documentElement.scrollWidth")
        robustness = page.evaluate(
            "(() => { const out = []; let el = [...document.querySelectorAll('h2')]"
            ".find(h => h.textContent === 'Robustness'); while ((el = el.nextElementSibling) && el.tagName !== 'H2')"
            " { for (const t of el.querySelectorAll('table')) out.push({width: t.getBoundingClientRect().right,"
            " heads: [...t.querySelectorAll('th')].map(th => th.textContent)}); } return out; })()")
        images = page.evaluate("[...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0, alt: i.alt}))")
        tables = page.evaluate("[...document.querySelectorAll('table')].map(t => ({rows: t.rows.length, "
                               "cells: t.querySelectorAll('td').length, height: t.getBoundingClientRect().height}))")
        provenance = page.evaluate("document.querySelectorAll('p.provenance').length")
        shot = page.screenshot(tmp_path / "report.png")
        if keep := os.environ.get("TTA_REPORT_SCREENSHOT"):  # look at the layout: TTA_REPORT_SCREENSHOT=/tmp/r.png
            shutil.copy(shot, keep)
    finally:
        page.close()
    assert len(images) == len(list(out.glob("*.png"))) >= 3
    assert all(i["ok"] for i in images), [i["alt"] for i in images if not i["ok"]]
    assert tables and all(t["rows"] >= 2 and t["cells"] > 0 and t["height"] > 0 for t in tables)
    assert provenance >= 1
    assert page_width <= 1400 and robustness and all(t["width"] <= 1400 for t in robustness), (page_width, robustness)
    assert not any("_" in h for t in robustness for h in t["heads"]), robustness
    assert page.errors == []
    assert shot.stat().st_size > 10_000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
