"""The sweep report on synthetic run directories: seed-grouped cells, marks only where the paired interval
excludes zero, win/tie/loss, cost and failed rows, row files that give the same intervals, clean labels, and the
metrics the robustness scores refuse."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.reporting.synthetic_runs import ranks_with_hits, write_run
from tta.report import main as report_main
from tta.reporting.collect import export_rows, load_rows, load_runs
from tta.reporting.full_report import build_report
from tta.reporting.pages import render_tables
from tta.reporting.paired import compare_cells
from tta.reporting.paper import paper_tables
from tta.reporting.run_list import list_table

N = 400


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """Source and a clearly better adapter (tent) on seeds 1-3, and one that differs by a single query (sar, seed 1)."""
    root = tmp_path_factory.mktemp("sweep")
    rng = np.random.default_rng(7)
    base = rng.random(N) < 0.3
    write_run(root, adapter="source", shift="clean", severity=5, ranks=ranks_with_hits(rng.random(N) < 0.5, rng))
    for seed in (1, 2, 3):  # a source that draws nothing at random: the same ranks at every seed
        write_run(root, adapter="source", seed=seed, ranks=ranks_with_hits(base, np.random.default_rng(8)), ms=10.0)
    for seed, extra in ((1, 0.20), (2, 0.25), (3, 0.15)):
        write_run(root, adapter="tent", seed=seed, ranks=ranks_with_hits(base | (rng.random(N) < extra), rng),
                  ms=30.0, method_share=0.5)
    one_more = base.copy()
    one_more[np.flatnonzero(~base)[0]] = True  # a 0.25-point "win"
    write_run(root, adapter="sar", seed=1, ranks=ranks_with_hits(one_more, rng), ms=20.0, method_share=0.4,
              failed=np.arange(N) < 3)
    return root


def test_cells_group_seeds_with_mean_sd_and_n(sweep):
    df, _ = load_runs([sweep])
    [table] = paper_tables(df)
    tent = df[(df["config"] == "tent") & (df["shift"] == "gaussian")]["R@1"]
    cell = ("clip4clip", "tent"), ("low-level", "gaussian")
    assert table.frame.loc[cell] == pytest.approx(tent.mean())
    assert table.sd.loc[cell] == pytest.approx(tent.std(ddof=1)) and table.n.loc[cell] == 3
    md = table.to_markdown()
    assert f"{tent.mean():.1f} ± {tent.std(ddof=1):.1f} (3)" in md


def test_only_intervals_that_exclude_zero_are_marked(sweep):
    df, _ = load_runs([sweep])
    comps, missing = compare_cells(df, "source")
    assert not missing
    by = {k.config: c for k, c in comps.items() if k.shift == "gaussian"}
    assert by["tent"].low > 0 and by["tent"].mark == "better"
    assert by["sar"].diff == pytest.approx(100 / N) and by["sar"].low <= 0 <= by["sar"].high
    [table] = paper_tables(df, comparisons=comps)
    assert table.marks.loc[("clip4clip", "tent"), ("low-level", "gaussian")] == "better"
    assert not isinstance(table.marks.loc[("clip4clip", "sar"), ("low-level", "gaussian")], str)
    rows = {line.split("|")[2].strip(): line for line in table.to_markdown().splitlines() if "| clip4clip |" in line}
    assert "▲" in rows["tent"] and "▲" not in rows["sar"] and "▼" not in rows["sar"] and "**" not in rows["sar"]


def test_report_writes_comparisons_cost_failed_rows_and_gain_plot(sweep, tmp_path, capsys):
    rep = build_report(sweep, tmp_path / "r", baseline="sar")
    detail, wtl, *_ = rep["comparisons"]
    assert wtl.frame.loc[("clip4clip", "tent"), ("", "wins")] == 1  # clean is not compared: tent has no clean run
    assert wtl.frame.loc[("clip4clip", "sar"), ("", "ties")] == 1
    assert "sar" in rep["comparisons"][2].title or "sar" in rep["comparisons"][3].title  # --baseline tables
    [table] = [t for t in rep["tables"] if "by severity" not in t.title]
    assert table.frame.loc[("clip4clip", "tent"), ("cost", "ms/query")] == pytest.approx(30.0)
    assert table.frame.loc[("clip4clip", "tent"), ("cost", "adapt %")] == pytest.approx(50.0)
    assert table.frame.loc[("clip4clip", "sar"), ("cost", "failed rows")] == 3
    assert any("sar: 3 failed row(s)" in n for n in table.notes)
    assert "1 run(s) with failed rows (3 rows" in rep["summary"]
    assert any(p.name.startswith("gain_cost_") for p in rep["figures"])
    csv = (tmp_path / "r" / "comparisons.csv").read_text()
    assert "95% low" in csv and "vs source" in csv
    assert r"$\pm$" in (tmp_path / "r" / "tables.tex").read_text()
    page = rep["html"].read_text()
    assert "Paired comparisons" in page and "failed rows" in page
    assert report_main([str(sweep), "--out", str(tmp_path / "cli")]) == 0
    assert "failed rows" in capsys.readouterr().out.splitlines()[-1]



def test_stream_shares_of_earlier_runs_never_share_the_adapt_column(tmp_path):
    """time_s.adapt was the whole stream's time before runs recorded time_s.stream: the adapt_share of such a run
    (a committed row, or a results.json without time_s.stream) is the stream's share and shows as "stream %" with a
    note; a current run's method share shows as "adapt %"; no column holds both."""
    rows = tmp_path / "rows.jsonl"
    old = {"config": "tent", "model": "xpool", "task": "v2t", "shift": "gaussian", "severity": 5, "scenario": "qs",
           "data": "synth", "train_data": "synth", "R@1": 30.0,
           "cost": {"adapt_share": 0.9, "peak_rss_mb": 900.0}}
    new = {**old, "config": "sar", "cost": {"method_share": 0.2, "stream_share": None, "peak_rss_mb": 900.0}}
    rows.write_text("\n".join(json.dumps(r) for r in (old, new)) + "\n")
    [table] = render_tables([rows], layout="list")
    tent, sar = (table.frame.xs(c, level="config").iloc[0] for c in ("tent", "sar"))
    assert tent[("", "stream %")] == pytest.approx(90.0) and np.isnan(tent[("", "adapt %")])
    assert sar[("", "adapt %")] == pytest.approx(20.0) and np.isnan(sar[("", "stream %")])
    assert any(n.startswith("stream %: the share of the run's wall time its query stream took") for n in table.notes)
    sweep = tmp_path / "sweep"  # results.json: the same key, told apart by time_s.stream
    ranks = np.arange(1, 41)
    for adapter, share, stream in (("source", 0.95, False), ("tent", 0.3, True)):
        res_file = write_run(sweep, adapter=adapter, ranks=ranks) / "results.json"
        res = json.loads(res_file.read_text())
        res["cost"] = {"ms_per_query": 10.0, "adapt_share": share, "peak_rss_mb": 900.0, "peak_gpu_mb": None}
        res["time_s"] = {"total": 1.0, "adapt": share, "per_query_ms": 10.0, **({"stream": 1.0} if stream else {})}
        res_file.write_text(json.dumps(res))
    [paper] = paper_tables(load_runs([sweep])[0])
    assert paper.frame.loc[("clip4clip", "source"), ("cost", "stream %")] == pytest.approx(95.0)
    assert np.isnan(paper.frame.loc[("clip4clip", "source"), ("cost", "adapt %")])
    assert paper.frame.loc[("clip4clip", "tent"), ("cost", "adapt %")] == pytest.approx(30.0)
    assert np.isnan(paper.frame.loc[("clip4clip", "tent"), ("cost", "stream %")])

def test_row_files_give_the_same_intervals_as_the_sweep(sweep, tmp_path):
    df, _ = load_runs([sweep])
    rows = export_rows(df, tmp_path / "rows.jsonl")
    assert all("per_query" in json.loads(line) for line in rows.read_text().splitlines())
    back, _ = load_runs([rows])
    a, _ = compare_cells(df, "source")
    b, _ = compare_cells(back, "source")
    strip = lambda d: {(k[5], k[6], k[7], k[8]): (c.diff, c.low, c.high, c.p) for k, c in d.items()}  # noqa: E731
    assert strip(a) == strip(b)
    [from_rows] = render_tables([rows], bold=True)
    [from_dir] = render_tables([sweep], bold=True)
    assert from_rows.to_markdown() == from_dir.to_markdown()
    assert "▲" in from_rows.to_markdown() and "**" in from_rows.to_markdown()  # tent beats sar: bold


def test_runs_from_different_source_weights_are_not_paired(tmp_path):
    """A method run on a checkpoint trained elsewhere is another experiment: its own table (the data label names
    the weights), never paired with source, and the split survives the row file."""
    rng = np.random.default_rng(3)
    base = rng.random(N) < 0.3
    write_run(tmp_path, adapter="source", ranks=ranks_with_hits(base, rng), source_weights="aaaa1111bbbb2222")
    write_run(tmp_path, adapter="tent", ranks=ranks_with_hits(base | (rng.random(N) < 0.3), rng),
              source_weights="cccc3333dddd4444")
    write_run(tmp_path, adapter="sar", ranks=ranks_with_hits(base | (rng.random(N) < 0.3), rng),
              source_weights="aaaa1111bbbb2222")
    df, _ = load_runs([tmp_path])
    for frame in (df, load_runs([export_rows(df, tmp_path / "rows.jsonl")])[0]):
        comps, missing = compare_cells(frame, "source")
        assert {k[6] for k in comps} == {"sar"} and comps[next(iter(comps))].mark == "better" and not missing
        assert frame.loc[frame["config"] == "tent", "data"].tolist() == ["synth (weights cccc3333)"]
    rep = build_report(tmp_path, tmp_path / "r")
    wtl = rep["comparisons"][1].frame
    assert ("clip4clip", "tent") not in wtl.index and wtl.loc[("clip4clip", "sar"), ("", "wins")] == 1
    tables = {t.title: t for t in rep["tables"] if "by severity" not in t.title}
    assert set(tables) == {"synth (weights aaaa1111) v2t (qs) | query shift",
                           "synth (weights cccc3333) v2t (qs) | query shift"}
    table = tables["synth (weights cccc3333) v2t (qs) | query shift"]
    assert "source weights cccc3333" in table.provenance
    assert not isinstance(table.marks.loc[("clip4clip", "tent"), ("low-level", "gaussian")], str)


def test_list_shows_what_refinement_changed_and_row_files_keep_it(tmp_path):
    rng = np.random.default_rng(5)
    write_run(tmp_path, adapter="source", ranks=ranks_with_hits(rng.random(N) < 0.3, rng))
    write_run(tmp_path, adapter="hsm", ranks=ranks_with_hits(rng.random(N) < 0.4, rng), raw=(30.5, 2.25))
    df, _ = load_runs([tmp_path])
    for frame in (df, load_runs([export_rows(df, tmp_path / "rows.jsonl")])[0]):
        table = list_table(frame, sort=True)
        hsm = table.frame.loc[("hsm", "clip4clip", "v2t", "gaussian s5")]
        assert hsm[("", "R@1 before refinement")] == 30.5 and hsm[("", "skewness before refinement")] == 2.25
        assert np.isnan(table.frame.loc[("source", "clip4clip", "v2t", "gaussian s5"), ("", "R@1 before refinement")])


def test_list_of_several_seeds_names_each_runs_seed(tmp_path):
    rng = np.random.default_rng(3)
    for seed in (2, 0, 1):
        write_run(tmp_path, adapter="tent", seed=seed, ranks=ranks_with_hits(rng.random(N) < 0.3 + seed / 10, rng))
    df, _ = load_runs([tmp_path])
    table = list_table(df, sort=True)
    assert table.frame.index.get_level_values("seed").tolist() == ["0", "1", "2"]
    assert table.frame[("", "R@1")].tolist() == sorted(df["R@1"])  # each line is its own run, in seed order
    assert "one seed per cell: 0, 1, 2" in table.caption() and "mean ± sd" not in table.caption()
    single = list_table(df[df["seed"] == 1])
    assert "seed" not in single.frame.index.names and "single seed (1)" in single.caption()


def test_old_rows_without_per_query_data_render_unmarked():
    from pathlib import Path

    rows = Path(__file__).resolve().parents[2] / "docs" / "results" / "rows" / "t2v-text-shifts.jsonl"
    [table, *_] = render_tables([rows], bold=True)
    md = table.to_markdown()
    assert "**" not in md.split("\n", 1)[1] and "▲" not in md and "no per-query ranks" in md


def test_clean_runs_are_labelled_clean_and_levels_are_shift_levels(tmp_path):
    rng = np.random.default_rng(0)
    write_run(tmp_path, adapter="source", shift="clean", severity=5, ranks=ranks_with_hits(rng.random(50) < 0.5, rng))
    for sev in (1, 3, 5):
        write_run(tmp_path, adapter="source", severity=sev, ranks=ranks_with_hits(rng.random(50) < 0.3, rng))
    df, _ = load_runs([tmp_path])
    [table] = paper_tables(df)
    md = table.to_markdown()
    assert "clean s5" not in md
    header, groups = md.splitlines()[2], md.splitlines()[4]
    assert "| clean | gaussian s1 | gaussian s3 | gaussian s5 | Avg |" in header
    assert "*clean* | *low-level* | *low-level* | *low-level* | *mean*" in groups


@pytest.mark.parametrize("metric", ["MdR", "MnR", "skewness"])
def test_robustness_of_meaningless_metrics_is_refused(sweep, tmp_path, capsys, metric):
    assert report_main([str(sweep), "--out", str(tmp_path / "x"), "--metric", metric]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"robustness of {metric} is meaningless" in err[0] and "--robustness" in err[0]
    assert not (tmp_path / "x").exists()
    assert report_main([str(sweep), "--out", str(tmp_path / "y"), "--metric", "MdR", "--robustness", "RSUM"]) == 0


def _pair_with_delta(delta: int) -> tuple[np.ndarray, np.ndarray]:
    """Rank-1 hits of a source arm (the first 120 of N queries) and of an arm with ``delta`` more (or fewer)."""
    base = np.zeros(N, bool)
    base[:120] = True
    arm = base.copy()
    if delta > 0:
        arm[120:120 + delta] = True
    else:
        arm[:-delta] = False
    return base, arm


def test_win_tie_loss_table_gives_the_mean_and_the_worst_cell(tmp_path):
    """Over two cells (gaussian: +10 points, fog: -5 points) the tally row carries pooled Δ = 2.5 and worst Δ = -5,
    and a note names the fog cell with its interval."""
    rng = np.random.default_rng(11)
    for shift, delta in (("gaussian", 40), ("fog", -20)):
        base, arm = _pair_with_delta(delta)
        write_run(tmp_path, adapter="source", shift=shift, ranks=ranks_with_hits(base, rng))
        write_run(tmp_path, adapter="tent", shift=shift, ranks=ranks_with_hits(arm, rng))
    rep = build_report(tmp_path, tmp_path / "r")
    wtl = rep["comparisons"][1]
    row = wtl.frame.loc[("clip4clip", "tent")]
    assert row[("", "pooled Δ")] == pytest.approx((100 * 40 / N - 100 * 20 / N) / 2)
    assert row[("", "worst Δ")] == pytest.approx(-100 * 20 / N)
    assert row[("", "wins")] == 1 and row[("", "losses")] == 1
    [note] = wtl.notes
    assert note.startswith("worst cell of clip4clip tent: synth v2t qs fog s5, Δ -5.0 [")
    # 2 comparisons, both marks survive Holm over them; the pooled difference has its interval
    assert wtl.title.endswith("2 comparisons") and "| 2 | 1 | 1 | 2.50 |" in wtl.to_markdown()
    assert row[("", "wins (Holm)")] == 1 and row[("", "losses (Holm)")] == 1
    assert row[("", "pooled low")] < 2.5 < row[("", "pooled high")]


def test_the_whole_matrix_pools_every_backbone_with_each_cell_weighing_the_same(tmp_path):
    """With two backbones a second tally adds them up: clip4clip's gaussian (+10) and fog (-5) cells and xpool's
    gaussian (+5) cell give 2 wins, 1 loss, mean (10 - 5 + 5) / 3 and the fog cell as the worst, named with its
    backbone. With one backbone there is no second tally."""
    rng = np.random.default_rng(5)
    for model, shift, delta in (("clip4clip", "gaussian", 40), ("clip4clip", "fog", -20), ("xpool", "gaussian", 20)):
        base, arm = _pair_with_delta(delta)
        write_run(tmp_path, model=model, adapter="source", shift=shift, ranks=ranks_with_hits(base, rng))
        write_run(tmp_path, model=model, adapter="tent", shift=shift, ranks=ranks_with_hits(arm, rng))
    comparisons = build_report(tmp_path, tmp_path / "r")["comparisons"]
    per_model, pooled = comparisons[1], comparisons[2]
    assert "every backbone together" in pooled.title and "every backbone" not in per_model.title
    row = pooled.frame.loc[("all", "tent")]
    assert (row[("", "wins")], row[("", "ties")], row[("", "losses")]) == (2, 0, 1)
    assert row[("", "pooled Δ")] == pytest.approx((10 - 5 + 5) / 3)
    assert row[("", "worst Δ")] == pytest.approx(-5)
    [note] = pooled.notes
    assert note.startswith("worst cell of all tent: clip4clip synth v2t qs fog s5, Δ -5.0 [")
    single = tmp_path / "one"
    for arm, hits in (("source", 120), ("tent", 160)):
        ranks = np.zeros(N, bool)
        ranks[:hits] = True
        write_run(single, adapter=arm, ranks=ranks_with_hits(ranks, rng))
    assert len(build_report(single, single / "r")["comparisons"]) == 2


def test_continual_streams_split_into_shifts_with_their_own_intervals(tmp_path):
    """--segments gives each shift of a continual stream its own row and paired interval, from the stream's
    query ranks: an arm that equals source on the mild shift and is clearly better on the severe one ties the
    first and wins the second, while the whole stream is one cell. A row file keeps the shifts and their ranks."""
    rng = np.random.default_rng(2)
    stream = [("gaussian", 1), ("gaussian", 5)]
    mild, severe = rng.random(N) < 0.4, rng.random(N) < 0.2
    better = severe.copy()
    better[np.flatnonzero(~severe)[:80]] = True  # +20 points on the severe shift only
    write_run(tmp_path, adapter="source", ranks=ranks_with_hits(np.r_[mild, severe], rng), stream=stream)
    write_run(tmp_path, adapter="hatvtr", ranks=ranks_with_hits(np.r_[mild, better], rng), stream=stream)
    whole, _ = load_runs([tmp_path])
    assert list(whole["shift"]) == ["stream", "stream"]
    split, _ = load_runs([tmp_path], segments=True)
    assert sorted(zip(split["config"], split["shift"], split["severity"], strict=True)) == [
        ("hatvtr", "gaussian", 1), ("hatvtr", "gaussian", 5), ("source", "gaussian", 1), ("source", "gaussian", 5)]
    src5 = split[(split["config"] == "source") & (split["severity"] == 5)].iloc[0]
    assert src5["R@1"] == pytest.approx(100 * severe.mean()) and src5["skewness"] == 2.0
    assert len(src5["queries"].rank) == N and not pd.isna(src5["RSUM"])
    rows = export_rows(whole, tmp_path / "rows.jsonl")
    for frame in (split, load_rows([rows], segments=True)):
        comps, missing = compare_cells(frame, "source")
        marks = {k[8]: c.mark for k, c in comps.items()}  # by severity
        assert not missing and marks == {1: "tie", 5: "better"}
        [diff5] = [c.diff for k, c in comps.items() if k[8] == 5]
        assert diff5 == pytest.approx(20.0)


@pytest.mark.parametrize("layout", [[], ["--layout", "pivot"]])
def test_a_source_that_does_not_exist_is_named_in_one_line(sweep, tmp_path, capsys, layout):
    missing = tmp_path / "sweeps" / "2026-11-27_typo"
    assert report_main([str(sweep), str(missing), "--out", str(tmp_path / "x"), *layout]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tta.report: {missing}: no such sweep directory or row file; give the hydra.sweep.dir of a "
                   f"sweep, a run directory or a .jsonl row file"]
    assert not (tmp_path / "x").exists()
