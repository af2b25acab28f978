"""The one results pipeline: tta.report over committed row files and sweeps, the docs/results pages, the experiment
configs (conf/experiment) and the tiny debug config (conf/debug/tiny.yaml).

The experiment and debug tests compose ``experiment=<name>`` / ``debug=tiny``: they need the two optional entries
of conf/run.yaml's defaults list (``- optional experiment: null``, ``- optional debug: null`` after ``_self_``).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from tests.conftest import tiny_overrides
from tta.report import main as report_main
from tta.reporting.collect import ADAPTER_ORDER, load_rows
from tta.reporting.labels import shift_label
from tta.reporting.pages import OWN_ROW_LAYOUTS, render_pages
from tta.reporting.paper import paper_tables
from tta.reporting.pivot import pivot_tables
from tta.reporting.plots import row_ranks
from tta.reporting.run_list import list_table
from tta.utils.config import compose

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results"
EXPERIMENTS = sorted(p.stem for p in (ROOT / "conf" / "experiment").glob("*.yaml"))
CONF = ROOT / "conf"


def _write_rows(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def _row(model, config, shift, sev, r1, task="t2v", **extra):
    key = json.dumps([config, [f"model={model}", f"task={task}", f"shift={shift}", f"adapter={config.split()[0]}",
                               *extra.pop("over", [])]])
    return {"key": key, "model": model, "config": config, "task": task, "shift": shift, "severity": sev,
            "scenario": "qs", "data": "synth", "train_data": "synth", "R@1": r1, "R@5": r1 + 10, "skewness": 0.5,
            "neg_share": 0.0, "ms_per_query": 1.0, **extra}


def test_pivot_without_per_query_ranks_bolds_nothing_and_averages_complete_columns(tmp_path):
    rows = [_row("xpool", "source", "clean", 0, 40.0), _row("xpool", "hatvtr", "clean", 0, 43.5),
            _row("xpool", "source", "ocr", 7, 6.0), _row("xpool", "hatvtr", "ocr", 7, 8.0),
            _row("xpool", "source", "formal", 1, 38.0), _row("xpool", "hatvtr", "formal", 1, 37.0),
            _row("xpool", "tent", "clean", 0, 30.0)]  # tent lacks the shifted rows: no mean
    df = load_rows([_write_rows(tmp_path / "rows.jsonl", rows)])
    [table] = pivot_tables(df, second=None, bold=True, mean=True)
    lines = table.to_markdown().splitlines()
    assert lines[2] == "| task | shift | source | tent | hatvtr |"  # the one adapter order
    assert lines[4] == "|  | *model* | *xpool* | *xpool* | *xpool* |"
    assert lines[5] == "| t2v | clean | 40.0 | 30.0 | 43.5 |"  # no interval, no bold
    assert lines[7] == "| t2v | formal s1 | 38.0 |  | 37.0 |"
    assert lines[-1] == "- these runs carry no per-query ranks: no intervals, nothing marked or bold"
    assert lines[-3] == "| mean | 2 shifts | 22.0 |  | 22.5 |"
    [r5] = pivot_tables(df[df["shift"] == "clean"], second="R@5")
    assert r5.to_markdown().splitlines()[5] == "| t2v | clean | 40.0 / 50.0 | 30.0 / 40.0 | 43.5 / 53.5 |"
    assert "single seed (42)" in table.caption()


def test_rows_read_adapter_seed_variants_streams_and_later_rows_win(tmp_path):
    rows = [_row("clip4clip", "hatvtr seed 0", "gaussian", 5, 20.0, task="v2t", over=["seed=0"]),
            _row("clip4clip", "hatvtr lr 3e-5", "gaussian", 5, 21.0, task="v2t", over=["adapter.method.lr=3e-5"]),
            _row("clip4clip", "source", "gaussian", 5, 10.0, task="v2t"),
            _row("clip4clip", "source", "gaussian", 5, 11.0, task="v2t"),  # a re-run of the same cell
            {**_row("xpool", "source", "clean", 0, 30.0, task="v2t"), "scenario": "continual",
             "segments": [{"shift": "gaussian", "severity": 1, "R@1": 36.0, "R@5": 80.0, "skewness": 0.9},
                          {"shift": "gaussian", "severity": 5, "R@1": 19.0, "R@5": 50.0, "skewness": 2.3}]}]
    file = _write_rows(tmp_path / "rows.jsonl", rows)
    df = load_rows([file])
    assert list(df["adapter"]) == ["hatvtr", "hatvtr", "source", "source"]
    assert list(df["seed"]) == [0, 42, 42, 42]
    assert df[df["config"] == "source"]["R@1"].tolist() == [11.0, 30.0]
    assert df.iloc[-1]["shift"] == "stream"  # a continual row is a stream, not "clean"
    split = load_rows([file], segments=True)
    assert split[split["scenario"] == "continual"]["shift"].tolist() == ["gaussian", "gaussian"]
    lines = list_table(df, sort=True).to_markdown().splitlines()
    assert lines[2] == "| config | model | task | shift | seed | R@1 | R@5 | skewness (k=10) | % sims < 0 | ms/query |"
    assert lines[4].startswith("| source | clip4clip | v2t | gaussian s5 | 42 | 11.0 |")  # runs of two seeds


def test_clean_runs_have_no_severity_and_every_column_shows_its_level():
    assert shift_label("clean", 5) == "clean" and shift_label("gaussian", 5) == "gaussian s5"
    rows = []
    for shift, sev, level in (("clean", 5, "clean"), ("gaussian", 1, "low"), ("gaussian", 5, "low")):
        rows.append({"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "adapter": "source",
                     "adapter_rank": 0, "level": level, "level_rank": ADAPTER_ORDER.index("source") if level == "clean"
                     else 1, "shift": shift, "severity": sev, "seed": 42, "train_data": None, "R@1": 10.0 * (2 + sev)})
    [table] = paper_tables(pd.DataFrame(rows))
    md = table.to_markdown().splitlines()
    assert md[2] == "| model | adapter | clean | gaussian s1 | gaussian s5 | Avg |"
    # no blank level cell, and the level reads as a kind of shift, not as a severity
    assert md[4] == "|  | *shift level* | *clean* | *low-level* | *low-level* | *mean* |"


def test_a_clean_run_swept_at_a_severity_is_labelled_clean(tmp_path):
    base = {"data": "synth", "task": "v2t", "scenario": "qs", "model": "xpool", "posthoc": "none", "seed": 42,
            "train_data": "synth", "num_queries": 10, "retrieval": {"R@1": 40.0, "R@5": 70.0},
            "hubness": {"skewness": 1.0, "k": 10}, "time_s": {"per_query_ms": 1.0}}
    for name, shift in (("a", "clean"), ("b", "gaussian")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps({**base, "adapter": "source", "shift": shift,
                                                                  "severity": 5}))
    assert report_main([str(tmp_path), "--out", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "tables.md").read_text()
    assert "| clean | gaussian | Avg |" in md and "clean s5" not in md


def test_row_ranks_make_raw_and_refined_scores_comparable():
    raw = np.array([[0.1, 0.5, 0.3], [0.2, 0.9, 0.4]])
    refined = np.array([[-3.0, 7.0, 1.0], [10.0, 90.0, 40.0]])  # another scale, the same order per row
    assert np.array_equal(row_ranks(raw), row_ranks(refined))
    assert row_ranks(raw)[0].tolist() == [0.0, 1.0, 0.5]


@pytest.mark.heavy  # the full report of 39 runs, plots included: seconds
def test_the_full_report_of_a_row_file_says_what_its_rows_do_not_record(tmp_path):
    """Row files keep each run's commit but not its checkout state, device or dates: the report must not call
    them clean (results.json has them; a row file does not)."""
    rows = RESULTS / "rows" / "lr-sensitivity.jsonl"
    commits = sorted({json.loads(line).get("commit", "")[:10] for line in rows.read_text().splitlines()})
    assert all(commits)
    assert report_main([str(rows), "--layout", "paper", "--out", str(tmp_path)]) == 0
    text = (tmp_path / "tables.md").read_text()
    named = f"commit{'s' if len(commits) > 1 else ''} {', '.join(commits)}"
    assert f"{named} (checkout state not recorded); device unknown; unknown dates" in text


@pytest.mark.heavy  # renders every row file and every committed page: tens of seconds, growing with the rows
def test_every_row_file_renders_and_the_committed_pages_are_current(tmp_path, capsys):
    pages = yaml.safe_load((RESULTS / "pages.yaml").read_text())
    own = {f: t["layout"] for page in pages.values() for t in page["tables"] if t.get("layout") in OWN_ROW_LAYOUTS
           for f in t["rows"]}
    for file in sorted((RESULTS / "rows").glob("*.jsonl")):
        if file.name in own:  # timings and benchmark tables, not runs (runtime, measurements)
            assert report_main([str(file), "--layout", own[file.name]]) == 0, file
            continue
        assert report_main([str(file)]) == 0, file
        assert report_main([str(file), "--layout", "list", "--sort"]) == 0, file
    assert "| t2v | clean |" in capsys.readouterr().out
    # the committed pages are what --pages renders now (the provenance lines and the render date aside)
    spec = tmp_path / "pages.yaml"
    spec.write_text((RESULTS / "pages.yaml").read_text())
    (tmp_path / "rows").symlink_to(RESULTS / "rows")
    written = render_pages(spec, date="2026-11-23")
    assert {p.stem for p in written} == {p.stem for p in RESULTS.glob("*.md")}

    def tables(text: str) -> list[str]:
        return [line for line in text.splitlines()
                if not line.startswith(("| rendered by", "| rows", "| code of", "| rendered on"))]

    for page in written:
        committed = RESULTS / page.name
        assert tables(page.read_text()) == tables(committed.read_text()), f"re-render {committed}"
        text = committed.read_text()
        assert "seed" in text.split("| |")[0].lower() and "| rendered on | 20" in text
        assert re.search(r"\| code of the rows \| .*[0-9a-f]{7}", text)


def test_docs_name_no_tracker_issues_and_links_resolve():
    docs = [ROOT / "README.md", ROOT / "launch" / "README.md", *(ROOT / "docs").rglob("*.md")]
    for doc in docs:
        text = doc.read_text()
        for heading in (line for line in text.splitlines() if line.startswith("#")):
            assert not re.search(r"issue \d|\d{4}-\d{2}-\d{2}", heading, re.I), (doc, heading)
        for target in re.findall(r"\]\(([^)#\s]+)", text):
            if not target.startswith("http"):
                assert (doc.parent / target).exists(), (doc, target)
    assert not list((ROOT / "docs").rglob("issue*"))


def test_the_readme_quotes_its_one_result_from_the_rendered_page():
    # README's "One result" is prose quoting the page tta.report renders: each number must be the page's
    section = (ROOT / "README.md").read_text().split("## One result")[1].split("\n## ")[0]
    page = (RESULTS / "v2t-gaussian-severity5.md").read_text()
    intervals = re.findall(r"(-?\d+\.\d) \[(-?\d+\.\d), (-?\d+\.\d)\]", section)
    means = re.findall(r"\d+\.\d ± \d+\.\d", section)
    assert len(intervals) == 18 and len(means) >= 4  # every method against source, both backbones
    compared = {m.groups() for m in re.finditer(r"\| (-?\d+\.\d)(?: [▲▼])? \| (-?\d+\.\d) \| (-?\d+\.\d) \|", page)}
    assert [i for i in intervals if i not in compared] == []
    assert [m for m in means if f"{m} (3)" not in page] == []


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_experiment_composes_and_sweeps_valid_choices(name):
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.override_parser.overrides_parser import OverridesParser

    from tta.utils.sweep import sweep_choice_error

    with initialize_config_dir(str(CONF), version_base="1.3"):
        cfg = hydra_compose("run", [f"experiment={name}"], return_hydra_config=True)
        assert sweep_choice_error(cfg) is None, name  # each group value names one of its files
    assert cfg.hydra.sweep.dir == f"outputs/experiments/{name}"
    params = cfg.hydra.sweeper.params
    assert params, name
    parsed = OverridesParser.create().parse_overrides([f"{k}={v}" for k, v in params.items()])
    # one job of the sweep composes as a plain run (the group choices and values fit together)
    first = [f"{o.get_key_element()}={(list(o.sweep_string_iterator()) if o.is_sweep_override() else [o.get_value_element_as_str()])[0]}"
             for o in parsed]
    job = compose("run", [f"experiment={name}", *first])
    assert job.adapter.name and job.shift.name


def test_every_results_page_has_its_experiment():
    import yaml

    pages = yaml.safe_load((RESULTS / "pages.yaml").read_text())
    for page, spec in pages.items():
        assert spec.get("experiments") or spec.get("reproduce"), page
        for e in spec.get("experiments", []):
            assert e in EXPERIMENTS, (page, e)
        if spec.get("experiments"):
            assert page in spec["experiments"], f"{page}: its first experiment should carry the page's name"


def test_paper_table_recipe_runs_one_experiment_per_table():
    script = (ROOT / "launch" / "paper_tables.sh").read_text()
    named = set(re.findall(r"paper-table[\w-]+", script))
    assert named == {e for e in EXPERIMENTS if e.startswith("paper-table")}
    assert "--config-dir launch" in script and "hydra/launcher=" in script


def test_debug_tiny_is_the_tests_tiny_configuration(tiny_cache):
    # the same configuration whether tests/conftest.py spells the overrides out or (once it does) uses debug=tiny
    via_debug = compose("run", ["debug=tiny", f"paths.cache_dir={tiny_cache}"])
    assert via_debug == compose("run", tiny_overrides(tiny_cache))
    assert via_debug.data.synth.n_test == 40 and via_debug.trainer.accelerator == "cpu"
    assert "steps=6" in via_debug.embedded_recipe


@pytest.mark.slow
def test_smallest_experiment_runs_through_hydra_multirun_and_reports(tiny_cache, tmp_path):
    sweep = tmp_path / "sweep"
    # mixed-severity restricted to one backbone and one seed: 2 jobs (source, hatvtr), on the tiny benchmark
    cmd = [sys.executable, "-m", "tta.run", "-m", "experiment=mixed-severity", "debug=tiny",
           f"paths.cache_dir={tiny_cache}", "model=clip4clip", "seed=0", "data.subset=16", f"hydra.sweep.dir={sweep}"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=1500, cwd=ROOT)
    assert out.returncode == 0, (out.stdout + out.stderr)[-4000:]
    results = [json.loads(f.read_text()) for f in sweep.rglob("results.json")]
    assert sorted(r["adapter"] for r in results) == ["hatvtr", "source"]
    assert {r["shift"] for r in results} == {"mixed_severity"}
    assert report_main([str(sweep), "--out", str(tmp_path / "report")]) == 0
    md = (tmp_path / "report" / "tables.md").read_text()
    assert "| clip4clip | source |" in md and "| clip4clip | hatvtr |" in md
    assert report_main([str(sweep), "--layout", "pivot"]) == 0
