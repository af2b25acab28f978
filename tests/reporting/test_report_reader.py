"""What a reader of the report sees: titles that name the scenario and the shifted side, readable robustness and
hubness tables, one mean gain everywhere, and k-occurrence panels titled with their own k."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.reporting.synthetic_runs import ranks_with_hits, write_run
from tta.metrics.hubness import hubness_from_occurrence
from tta.reporting.collect import load_sweep
from tta.reporting.full_report import _gain_cost_points
from tta.reporting.hubness import hubness_tables
from tta.reporting.labels import shift_caption, shifted_side
from tta.reporting.paired import compare_cells, comparison_tables
from tta.reporting.paper import paper_tables
from tta.reporting.plots import _skewness_of
from tta.reporting.robustness import robustness_markdown, robustness_table


def test_the_shifted_side_follows_the_shift_and_the_task():
    assert shifted_side("gaussian", "v2t") == "query" and shifted_side("gaussian", "t2v") == "gallery"
    assert shifted_side("ocr", "t2v") == "query" and shifted_side("clean", "v2t") == "none"
    assert shift_caption("gaussian", 5, "t2v") == "gallery: gaussian s5"
    assert shift_caption("ocr", 7, "t2v", "gaussian s3") == "query: ocr s7, gallery: gaussian s3"
    assert shift_caption("clean", 5, "v2t") == "clean"


@pytest.fixture
def sweep(tmp_path):
    rng = np.random.default_rng(0)
    base = rng.random(200) < 0.4
    for task in ("v2t", "t2v"):
        write_run(tmp_path, adapter="source", shift="clean", severity=0, task=task, ranks=ranks_with_hits(base, rng))
        write_run(tmp_path, adapter="tent", shift="clean", severity=0, task=task,
                  ranks=ranks_with_hits(base | (rng.random(200) < 0.02), rng))
        for sev in (1, 5):
            hits = base & (rng.random(200) < 1 - 0.15 * sev)
            write_run(tmp_path, adapter="source", shift="gaussian", severity=sev, task=task,
                      ranks=ranks_with_hits(hits, rng))
            write_run(tmp_path, adapter="tent", shift="gaussian", severity=sev, task=task,
                      ranks=ranks_with_hits(hits | (rng.random(200) < 0.1), rng))
    df, _ = load_sweep(tmp_path)
    return df


def test_every_table_names_the_scenario_and_the_shifted_side(sweep):
    titles = [t.title for t in paper_tables(sweep)]
    assert titles == ["synth t2v (qs) | gallery shift", "synth v2t (qs) | query shift"]
    assert [t.title for t in hubness_tables(sweep)] == [f"{t}: hubness" for t in titles]


def test_robustness_tables_have_words_for_headers_and_their_benchmark_in_the_title(sweep):
    rob, _ = robustness_table(sweep)
    md = robustness_markdown(rob, sweep)
    heads = [line for line in md.splitlines() if line.startswith("| model")]
    assert len(heads) == 2 and not any("_" in h for h in heads)  # one table per (data, task, scenario)
    assert "**synth t2v (qs) | gallery shift**" in md and "**synth v2t (qs) | query shift**" in md
    assert len(heads[0].split("|")) - 2 <= 10  # few enough columns for a 1400-px page
    overall = rob[(rob["scope"] == "type") & (rob["adapter"] == "source")].iloc[0]
    assert f"{overall['relative_robustness']:.3f} ± {overall['relative_robustness_sd']:.3f}" in md


def test_the_gain_plot_and_the_win_tie_loss_table_have_one_mean(sweep):
    # the plot took the mean over the shifted cells (+6.7), the table over every paired cell (6.00): now both are
    # the mean over every paired cell, each weighing the same
    v2t = sweep[sweep["task"] == "v2t"]
    comps, missing = compare_cells(v2t, "source")
    assert any(k[7] == "clean" for k in comps)
    wtl = next(t for t in comparison_tables(comps, missing, "source") if t.title.startswith("wins"))
    [gain] = _gain_cost_points(v2t, comps, "source")["gain"]
    assert gain == pytest.approx(wtl.frame.loc[("clip4clip", "tent"), ("", "pooled Δ")])
    assert gain == pytest.approx(np.mean([c.diff for c in comps.values()]))


def test_hubness_table_reads_its_k_and_marks_deterministic_cells(sweep):
    table = hubness_tables(sweep.assign(hubness_k=10))[0]
    assert "k = 10" in table.caption() and ("", "skewness") in table.frame.columns
    assert table.frame.index.names == ["model", "adapter", "shift"]
    assert ("clip4clip", "source", "gallery: gaussian s5") in table.frame.index


def test_k_occurrence_panels_carry_the_skewness_of_their_own_k():
    counts = [0, 0, 1, 2, 3, 9, 15]  # N_3 of 10 queries over 7 gallery items
    assert _skewness_of(counts, 3) == pytest.approx(hubness_from_occurrence(counts, 3, num_queries=10)["skewness"])


def test_the_run_title_names_scenario_and_side(capsys):
    from tta.run import print_results

    res = {"data": "synth", "task": "t2v", "scenario": "qs", "model": "xpool", "adapter": "hatvtr",
           "shift": "gaussian", "severity": 5, "num_queries": 10, "num_gallery": 10,
           "time_s": {"total": 1.0, "adapt": 0.5, "per_query_ms": 50.0},
           "retrieval": {k: 1.0 for k in ("R@1", "R@5", "R@10", "R@50", "MdR", "MnR")},
           "hubness": {"k": 10, **{k: 0.0 for k in ("skewness", "trunc_skewness", "atkinson", "robin_hood",
                                                      "antihub", "hub_occurrence")}}}
    print_results(res)
    out = " ".join(capsys.readouterr().out.split())
    assert "synth t2v (qs) | xpool + hatvtr | gallery: gaussian s5" in out


def test_a_frame_without_gallery_or_task_columns_still_gets_a_title():
    frame = pd.DataFrame([{"data": "synth", "task": "v2t", "scenario": "qs", "model": "m", "adapter": "source",
                           "adapter_rank": 0, "level": "low", "level_rank": 1, "shift": "gaussian", "severity": 5,
                           "seed": 0, "R@1": 10.0}])
    assert paper_tables(frame)[0].title == "synth v2t (qs) | query shift"
