"""Retrieval metrics per video category (MSR-VTT's 20 categories; the scene background of the embedded benchmark).

A query's category is that of its pair's video. Each category's R@K, MdR and MnR are computed over its own queries
(with the same ranks as the whole run, i.e. against the full gallery), so the categories' R@1 weighted by their
query counts give the run's R@1.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from tta.metrics.retrieval import metrics_from_ranks


def metrics_by_category(ranks: torch.Tensor, categories: Sequence[str | None], median: str = "lower") -> dict:
    """``{category: {"num_queries", "R@1", ..., "MnR"}}`` in sorted category order; queries without a category
    are grouped under ``"unknown"``. Empty when the queries do not fall into at least two categories (one category
    would only repeat the run's metrics)."""
    if len(categories) != len(ranks):
        raise ValueError(f"{len(ranks)} ranks but {len(categories)} query categories")
    names = ["unknown" if c is None else str(c) for c in categories]
    if len(set(names)) < 2 or all(c is None for c in categories):
        return {}
    out = {}
    for name in sorted(set(names)):
        rows = torch.tensor([i for i, n in enumerate(names) if n == name])
        out[name] = {"num_queries": len(rows), **metrics_from_ranks(ranks[rows], median)}
    return out
