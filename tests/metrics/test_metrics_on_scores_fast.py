"""Retrieval and hubness metrics on constructed score matrices and on the tiny model's scores (fast tier); the
exhaustive metric checks (brute force, ties, medians, errors) are in tests/metrics/test_metrics.py, also fast."""

from __future__ import annotations

import math

import torch

from tests.fixtures import build_fast_env, make_fast_adapter, stream
from tta.metrics import hubness_metrics, retrieval_metrics, rsum


def test_constructed_matrix_ranks_and_a_hub():
    # query i ranks its own item at position i (0-based) except query 3, whose item is first; item 0 is a hub
    sims = torch.tensor([[0.9, 0.1, 0.2, 0.3],
                         [0.8, 0.7, 0.1, 0.2],
                         [0.9, 0.8, 0.3, 0.1],
                         [0.1, 0.2, 0.3, 0.95]])
    m = retrieval_metrics(sims, torch.arange(4))
    assert math.isclose(m["R@1"], 50.0) and math.isclose(m["R@5"], 100.0)
    assert math.isclose(rsum(m), m["R@1"] + m["R@5"] + m["R@10"])
    h = hubness_metrics(sims, k=1)
    assert h and all(isinstance(v, float) for v in h.values())


def test_metrics_on_the_tiny_model_scores():
    env = build_fast_env("xpool", "t2v", batch_sizes=(4, 4))
    rows = stream(make_fast_adapter(env, "source"), env.batches)
    m = retrieval_metrics(rows, env.gt)
    assert 0.0 <= m["R@1"] <= m["R@5"] <= m["R@10"] <= 100.0
    h = hubness_metrics(rows, k=2)
    assert all(math.isfinite(v) or math.isnan(v) for v in h.values())
