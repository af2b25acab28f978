"""A cell of a table is one configuration: every setting but the seed is part of it. Runs repeated under other
names count once, streams that draw nothing at random are shown once and marked, a gallery-shifted run is its own
cell, and runs over other query counts, source weights or settings are never pooled."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from tests.reporting.synthetic_runs import ranks_with_hits, write_run
from tta.reporting.collect import load_rows, load_sweep
from tta.reporting.paired import compare_cells
from tta.reporting.paper import paper_tables
from tta.reporting.pivot import pivot_tables
from tta.reporting.robustness import robustness_table


def _config(adapter: str, shift: str, severity: int, seed: int, subset=200, lr=None) -> dict:
    """The part of a resolved run config that the cells read (results.json "config")."""
    adapter_cfg = {"name": adapter, "method": {"lr": lr}} if lr is not None else {"name": adapter}
    return {"seed": seed, "shift_seed": None, "model": {"name": "xpool"}, "task": "v2t", "adapter": adapter_cfg,
            "shift": {"name": shift, "severity": severity}, "data": {"name": "synth", "subset": subset, "workers": 2},
            "paths": {"cache_dir": f"/tmp/cache{seed}"}, "loader_workers": 2}


def test_sweep_report_example_repeats_clean_once_and_marks_it_deterministic(tmp_path):
    # experiment=sweep-report-example: source/tcr/hatvtr x shift clean,gaussian x shift.severity 1,3,5 at seed 42:
    # the three clean jobs of each adapter are one configuration (a clean stream has no severity)
    rng = np.random.default_rng(0)
    clean = {a: ranks_with_hits(rng.random(100) < p, rng) for a, p in (("source", .75), ("tcr", .75), ("hatvtr", .74))}
    for adapter in clean:
        for sev in (1, 3, 5):
            write_run(tmp_path, adapter=adapter, shift="clean", severity=sev, seed=42, ranks=clean[adapter],
                      model="xpool", config=_config(adapter, "clean", sev, 42))
            write_run(tmp_path, adapter=adapter, shift="gaussian", severity=sev, seed=42, model="xpool",
                      ranks=ranks_with_hits(rng.random(100) < 0.8 - 0.1 * sev, rng),
                      config=_config(adapter, "gaussian", sev, 42))
    df, _ = load_sweep(tmp_path)
    assert len(df) == 12 and set(df.loc[df["shift"] == "clean", "repeats"]) == {3}
    assert df.loc[df["shift"] == "clean", "deterministic"].all()
    assert not df.loc[df["shift"] == "gaussian", "deterministic"].any()  # one run each: nothing to tell
    table = paper_tables(df)[0]  # the comparisons (marks) are another module's: none here
    md = table.to_markdown()
    assert "single seed (42)" in md and "± 0.0" not in md and "(3)" not in md
    src_clean = table.frame.loc[("xpool", "source"), ("clean", "clean")]
    assert f"{src_clean:.1f} (det.)" in md
    comps, _ = compare_cells(df, "source")
    assert all(c.seeds_a == (42,) and c.seeds_b == (42,) and c.runs == 1 for c in comps.values())  # one run, not three


def test_identical_ranks_over_seeds_are_deterministic_and_other_ranks_are_not(tmp_path):
    rng = np.random.default_rng(1)
    fixed = ranks_with_hits(rng.random(100) < 0.4, rng)
    for seed in (0, 1, 2):
        write_run(tmp_path, adapter="source", shift="motion_blur", seed=seed, ranks=fixed)
        write_run(tmp_path, adapter="source", shift="gaussian", seed=seed,
                  ranks=ranks_with_hits(rng.random(100) < 0.3, rng))
    df, _ = load_sweep(tmp_path)
    det = df.groupby("shift")["deterministic"].agg(["all", "any"])
    assert det.loc["motion_blur", "all"] and not det.loc["gaussian", "any"]
    md = paper_tables(df)[0].to_markdown()
    assert f"{100 * np.mean(fixed == 1):.1f} (det.)" in md and "(3)" in md  # gaussian keeps mean ± sd (3)


def test_a_gallery_shifted_run_is_its_own_cell(tmp_path):
    # "ocr s7" at R@1 30 and "ocr s7 + gallery gaussian s3" at 10 were one cell of 20.0, n = 2
    hits = np.zeros(100, bool)
    write_run(tmp_path, adapter="source", shift="clean", severity=0, task="t2v", ranks=np.full(100, 1))
    write_run(tmp_path, adapter="source", shift="ocr", severity=7, task="t2v", ranks=np.where(np.arange(100) < 30, 1, 5))
    write_run(tmp_path, adapter="source", shift="ocr", severity=7, task="t2v", gallery_shift=("gaussian", 3),
              ranks=np.where(np.arange(100) < 10, 1, 5 + hits))
    df, _ = load_sweep(tmp_path)
    table = paper_tables(df)[0]
    cols = {c[1]: table.frame.loc[("clip4clip", "source"), c] for c in table.frame.columns if c[1] != "Avg"}
    assert cols["ocr"] == pytest.approx(30.0) and cols["ocr + gallery gaussian s3"] == pytest.approx(10.0)
    assert table.n.loc[("clip4clip", "source")].max() == 1
    pivot = pivot_tables(df, second=None)[0]
    assert ("t2v", "ocr s7 + gallery gaussian s3") in pivot.frame.index and ("t2v", "ocr s7") in pivot.frame.index
    rob, _ = robustness_table(df)
    assert set(rob["gallery"]) == {"none", "gaussian s3"}


def test_runs_of_other_query_counts_or_source_weights_are_never_pooled(tmp_path):
    # tta.report outputs/runs pooled runs of 1,000 and 100 queries (one from debug=tiny with other weights)
    rng = np.random.default_rng(2)
    write_run(tmp_path / "a", adapter="source", seed=0, ranks=ranks_with_hits(rng.random(1000) < 0.6, rng),
              source_weights="aaaaaaaa11")
    write_run(tmp_path / "b", adapter="source", seed=1, ranks=ranks_with_hits(rng.random(100) < 0.1, rng),
              source_weights="aaaaaaaa11")
    write_run(tmp_path / "c", adapter="source", seed=2, ranks=ranks_with_hits(rng.random(1000) < 0.5, rng),
              source_weights="bbbbbbbb22")
    df, _ = load_sweep(tmp_path)
    assert sorted(df["data"]) == ["synth (1,000 queries) (weights aaaaaaaa)", "synth (1,000 queries) (weights bbbbbbbb)",
                                  "synth (100 queries)"]
    tables = paper_tables(df)
    assert len(tables) == 3 and all(t.n.max().max() == 1 for t in tables)
    assert any(t.title.startswith("synth (100 queries) v2t") for t in tables)


def test_runs_that_differ_in_a_setting_are_separate_configurations(tmp_path):
    rng = np.random.default_rng(3)
    for lr in (1e-5, 3e-5):
        write_run(tmp_path / str(lr), adapter="hatvtr", seed=0, ranks=ranks_with_hits(rng.random(100) < 0.4, rng),
                  config=_config("hatvtr", "gaussian", 5, 0, lr=lr))
    df, _ = load_sweep(tmp_path)
    assert sorted(df["config"]) == ["hatvtr (adapter.method.lr=1e-05)", "hatvtr (adapter.method.lr=3e-05)"]
    assert df["repeats"].tolist() == [1, 1]



def test_a_shift_option_labels_the_shift_so_the_methods_on_that_stream_pair(tmp_path):
    """``shift.options.ratio`` (mixed_types) is part of the stream: source and HAT-VTR at one ratio are one cell's
    two columns, compared query by query, and each ratio is its own row."""
    rng = np.random.default_rng(4)
    for ratio in (0.2, 0.4):
        for adapter in ("source", "hatvtr"):
            config = _config(adapter, "mixed_types", 0, 0)
            config["shift"]["options"] = {"ratio": ratio}
            write_run(tmp_path / f"{adapter}{ratio}", adapter=adapter, shift="mixed_types", severity=0, seed=0, config=config,
                      ranks=ranks_with_hits(rng.random(100) < 0.4, rng))
    df, _ = load_sweep(tmp_path)
    assert sorted(df["config"].unique()) == ["hatvtr", "source"]
    assert sorted(df["shift"].unique()) == ["mixed_types (ratio=0.2)", "mixed_types (ratio=0.4)"]
    compared, unpaired = compare_cells(df, "source")
    assert sorted(cell.shift for cell in compared) == ["mixed_types (ratio=0.2)", "mixed_types (ratio=0.4)"]
    assert not unpaired

def test_committed_rows_deterministic_streams_are_shown_once():
    # X-Pool MLVP rows, seeds 0-2: clean, motion blur, video defocus and H.264 draw nothing at random
    df = load_rows(["docs/results/rows/mlvp-severity5-xpool.jsonl"])
    det = df[df["deterministic"]]
    cells = set(zip(det["config"], det["shift"], strict=True))
    assert {("source", "clean"), ("source", "motion_blur"), ("hsm", "video_defocus"),
            ("hatvtr", "h264_compression")} <= cells
    assert not df[df["shift"] == "gaussian"]["deterministic"].any()
    md = pivot_tables(df[df["shift"].isin(["clean", "gaussian"])], second=None)[0].to_markdown()
    assert "± 0.0" not in md and "(det.)" in md


def test_row_files_take_the_query_count_from_the_ranks_and_setup_from_the_overrides(tmp_path):
    rows = [json.loads(line) for line in open("docs/results/rows/mlvp-severity5-xpool.jsonl") if line.strip()][:2]
    for r in rows:
        r.pop("num_queries", None)
    label, overrides = json.loads(rows[0]["key"])
    rows[1]["key"] = json.dumps([label, [o for o in overrides if not o.startswith("seed=")] + ["seed=7",
                                                                                             "adapter.method.lr=3e-5"]])
    rows[1].update({k: rows[0][k] for k in ("config", "shift", "severity", "model", "task")}, seed=7)
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    df = load_rows([path])
    assert df["num_queries"].tolist() == [1000, 1000]
    assert df["config"].iloc[1].endswith("(adapter.method.lr=3e-05)") and "(" not in df["config"].iloc[0]


def test_a_frame_without_the_new_columns_still_renders():
    frame = pd.DataFrame([{"data": "synth", "task": "v2t", "scenario": "qs", "model": "m", "adapter": "source",
                           "adapter_rank": 0, "level": "low", "level_rank": 1, "shift": "gaussian", "severity": 5,
                           "seed": 0, "R@1": 10.0}])
    assert "10.0" in paper_tables(frame)[0].to_markdown()
