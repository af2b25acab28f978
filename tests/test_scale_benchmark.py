"""benchmarks/scale.py on a tiny size: every method streams through its adapter and the streamed metrics equal the
dense ones; the embedding generator and its expansion are seeded. Times are printed by the benchmark, never asserted."""

from __future__ import annotations

import pytest
import torch

from benchmarks import scale
from tta.metrics import gt_ranks, metrics_from_ranks
from tta.reporting.pages import render_tables


def test_seeded_embeddings_repeat_and_keep_their_pairing():
    q1, g1 = scale.seed_pairs(300, 32, seed=3)
    q2, g2 = scale.seed_pairs(300, 32, seed=3)
    assert torch.equal(q1, q2) and torch.equal(g1, g2)
    model = scale.fit_expansion(q1, g1, clusters=8, seed=3)
    gallery = scale.sample_gallery(model, 500, seed=4, chunk=128)  # chunked sampling, several chunks
    assert gallery.shape == (500, 32) and torch.allclose(gallery.norm(dim=1), torch.ones(500))
    assert torch.equal(gallery, scale.sample_gallery(model, 500, seed=4, chunk=128))
    queries = scale.paired_queries(model, gallery, 700, seed=5)
    ranks = gt_ranks(queries @ gallery.T, torch.arange(700) % 500)
    assert metrics_from_ranks(ranks)["R@10"] > 50  # a query finds its own item far more often than chance (2 %)


@pytest.mark.heavy
def test_quick_benchmark_runs_every_method_and_reports_streamed_metrics(tmp_path):
    out = tmp_path / "scale.md"
    rows = scale.main(["--quick", "--sizes", "200", "--queries", "48", "--out", str(out),
                       "--rows", str(tmp_path / "scale.jsonl")])
    assert [r["method"] for r in rows] == list(scale.METHODS)
    assert all(r["scored"] == 48 and r["peak_rss_mb"] > 0 for r in rows)
    # the source row's R@1 is that of the dense score matrix of the same seeded embeddings
    model = scale.fit_expansion(*scale.seed_pairs(2000, 512, 0), clusters=64, seed=0)
    gallery = scale.sample_gallery(model, 200, seed=1)
    queries = scale.paired_queries(model, gallery, 48, seed=2)
    dense = metrics_from_ranks(gt_ranks(queries @ gallery.T, torch.arange(48) % 200))
    assert rows[0]["R@1"] == dense["R@1"]
    text = out.read_text()
    assert "Command: `python benchmarks/scale.py --quick" in text and "commit" in text
    assert all(f"| {m} | 200 |" in text for m in scale.METHODS)
    # the row file holds the printed table: the same lines, under the command that measured them
    (table,) = render_tables([tmp_path / "scale.jsonl"], layout="measurements")
    rendered = table.to_markdown()
    assert "(measured by `python benchmarks/scale.py --quick --sizes 200" in rendered
    assert [line for line in rendered.splitlines() if line.startswith("| ")] == \
           [line for line in text.splitlines() if line.startswith("| ")][:len(rows) + 1]


def test_stream_rows_and_growth_become_row_files(tmp_path):
    measured = [{"method": "source", "gallery": 1000, "queries": 10000, "scored": 10000, "ms_per_query": 0.09,
                 "peak_rss_mb": 1071.2, "peak_above_inputs_mb": 5.0, "R@1": 82.5, "skewness": 0.31},
                {"method": "source", "gallery": 10000, "queries": 10000, "scored": 2288, "ms_per_query": 0.32,
                 "peak_rss_mb": 1196.0, "peak_above_inputs_mb": 0.0, "R@1": 66.1, "skewness": 1.21},
                {"method": "dsl", "gallery": 10000, "queries": 10000, "skipped": "state ~32 GB > 12"}]
    streams, growth = scale.write_rows(tmp_path / "s.jsonl", measured, [1000, 10000], ["source", "dsl"],
                                       "python benchmarks/scale.py", "seeded generator", "2026-11-28 12:00")
    assert growth.name == "s-growth.jsonl"
    lines = [t.to_markdown().splitlines() for t in render_tables([streams, growth], layout="measurements")]
    assert lines[0][-3:] == ["| source | 1,000 | 10,000 | 0.09 | 1071 | 5 | 82.5 | 0.31 |",
                             "| source | 10,000 | 10,000 (partial: 2,288) | 0.32 | 1196 | 0 | 66.1 | 1.21 |",
                             "| dsl | 10,000 | 10,000 | skipped: state ~32 GB > 12 | | | | |"]  # as printed
    assert lines[1][-2:] == ["| source | 3.6x time, 1.12x memory |", "| dsl | n/a |"]


@pytest.mark.heavy
def test_a_method_over_the_memory_limit_is_skipped_with_its_estimate():
    rows = scale.main(["--sizes", "200", "--queries", "16", "--methods", "hsm_incremental,hsm_direct",
                       "--memory-limit-gb", "0.001"])
    assert "scored" in rows[0] and rows[1]["skipped"].startswith("state ~")
