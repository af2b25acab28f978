"""benchmarks/scale.py on a tiny size: every method streams through its adapter and the streamed metrics equal the
dense ones; the embedding generator and its expansion are seeded. Times are printed by the benchmark, never asserted."""

from __future__ import annotations

import pytest
import torch

from benchmarks import scale
from tta.metrics import gt_ranks, metrics_from_ranks


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
    rows = scale.main(["--quick", "--sizes", "200", "--queries", "48", "--out", str(out)])
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


@pytest.mark.heavy
def test_a_method_over_the_memory_limit_is_skipped_with_its_estimate():
    rows = scale.main(["--sizes", "200", "--queries", "16", "--methods", "hsm_incremental,hsm_direct",
                       "--memory-limit-gb", "0.001"])
    assert "scored" in rows[0] and rows[1]["skipped"].startswith("state ~")
