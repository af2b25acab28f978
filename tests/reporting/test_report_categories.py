"""The report's per-category table and shift-effect columns (tta/reporting/categories.py, tables.list_table) on
hand-made results.json files, and their round trip through a row file."""

from __future__ import annotations

import json

from tests.reporting.synthetic_runs import write_run
from tta.reporting.collect import load_runs
from tta.reporting.full_report import build_report
from tta.reporting.run_list import list_table


def _add(run_dir, **fields):
    res = json.loads((run_dir / "results.json").read_text())
    res.update(fields)
    (run_dir / "results.json").write_text(json.dumps(res))


def _runs(root):
    a = write_run(root, shift="gaussian", ranks=[1, 1, 3, 7])
    _add(a, by_category={"grass": {"num_queries": 2, "R@1": 100.0}, "sky": {"num_queries": 2, "R@1": 0.0}},
         consistency={"top1_unchanged": 0.5, "top5_overlap": 0.75}, input_change={"query": {
             "distance_mean": 0.125, "changed_share": 1.0}}, query_filter={"filtered_share": 0.2})
    b = write_run(root, shift="fog", ranks=[2, 1, 1, 1])
    _add(b, by_category={"grass": {"num_queries": 2, "R@1": 50.0}, "sand": {"num_queries": 2, "R@1": 100.0}},
         gallery_shift={"name": "ocr", "severity": 7, "options": {}})
    return a, b


def test_report_breaks_results_down_by_category(tmp_path):
    _runs(tmp_path / "sweep")
    out = build_report(tmp_path / "sweep")
    text = (tmp_path / "sweep" / "report" / "categories.md").read_text()
    header = next(line for line in text.splitlines() if line.startswith("| config"))
    assert header.endswith("| grass | sand | sky |")
    rows = {line.split("|")[4].strip(): line for line in text.splitlines() if line.startswith("| source")}
    assert rows["gaussian s5"].endswith("| 100.0 |  | 0.0 |")
    assert rows["fog s5 + gallery ocr s7"].endswith("| 50.0 | 100.0 |  |")
    assert "queries per category: grass 2, sand 2, sky 2" in text
    # the title names the scenario and the shifted sides (fog on v2t queries; ocr on the gallery's captions)
    assert [t.title for t in out["categories"]] == ["R@1 per video category: synth v2t (qs) | query and gallery shift"]
    page = (tmp_path / "sweep" / "report" / "index.html").read_text()
    assert "<h2>Per video category</h2>" in page and ">grass<" in page and ">sand<" in page
    assert "<h2>Hubness</h2>" in page


def test_no_category_table_without_categories(tmp_path):
    write_run(tmp_path / "sweep", ranks=[1, 2])
    one = write_run(tmp_path / "sweep", shift="fog", ranks=[1, 2])
    _add(one, by_category={"0": {"num_queries": 2, "R@1": 50.0}})
    build_report(tmp_path / "sweep")
    assert not (tmp_path / "sweep" / "report" / "categories.md").exists()


def test_effect_columns_survive_a_row_file(tmp_path):
    _runs(tmp_path / "sweep")
    build_report(tmp_path / "sweep", rows=tmp_path / "rows.jsonl")
    for source in (tmp_path / "sweep", tmp_path / "rows.jsonl"):
        df, _ = load_runs([source])
        table = list_table(df, sort=True)
        row = table.frame.loc[("source", "clip4clip", "v2t", "gaussian s5")]
        assert row[("", "top-1 kept %")] == 50.0 and row[("", "top-5 overlap %")] == 75.0
        assert row[("", "input distance")] == 0.125 and row[("", "filtered %")] == 20.0
        assert ("source", "clip4clip", "v2t", "fog s5 + gallery ocr s7") in table.frame.index
