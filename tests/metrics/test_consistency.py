"""Per-query consistency with a reference ranking (tta/metrics/consistency.py) and per-category metrics
(tta/metrics/categories.py) on constructed scores, against hand-computed values."""

from __future__ import annotations

import pytest
import torch

from tta.metrics.categories import metrics_by_category
from tta.metrics.consistency import consistency

# three queries over a gallery of six; the reference's top-5 of every row is items 0..4 (item 0 first)
REFERENCE = torch.tensor([[6.0, 5.0, 4.0, 3.0, 2.0, 1.0]] * 3)
SCORES = torch.tensor([
    [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],  # identical: top-1 kept, top-5 overlap 5/5
    [1.0, 6.0, 5.0, 4.0, 3.0, 2.0],  # top-1 moves to item 1; top-5 = {1,2,3,4,5}: overlap 4/5
    [5.0, 1.0, 1.0, 1.0, 1.0, 6.0],  # top-1 item 5; top-5 = {5,0,1,2,3} (ties to the lower index): overlap 4/5
])


def test_top1_share_and_top5_overlap_by_hand():
    out = consistency(SCORES, REFERENCE)
    assert out["top1_unchanged"] == pytest.approx(1 / 3)
    assert out["top5_overlap"] == pytest.approx((1.0 + 0.8 + 0.8) / 3)
    assert (out["k"], out["num_queries"]) == (5, 3)


def test_identical_scores_are_fully_consistent_and_a_failed_row_counts_as_changed():
    same = consistency(REFERENCE, REFERENCE)
    assert same["top1_unchanged"] == 1.0 and same["top5_overlap"] == 1.0
    broken = REFERENCE.clone()
    broken[1, 2] = float("nan")
    out = consistency(broken, REFERENCE)
    assert out["top1_unchanged"] == pytest.approx(2 / 3) and out["top5_overlap"] == pytest.approx(2 / 3)


def test_ties_in_the_reference_go_to_the_lower_index():
    ref = torch.tensor([[1.0, 1.0, 0.0]])
    assert consistency(torch.tensor([[0.0, 2.0, 1.0]]), ref, k=1)["top1_unchanged"] == 0.0  # ref top-1 is item 0
    assert consistency(torch.tensor([[2.0, 0.0, 1.0]]), ref, k=1)["top1_unchanged"] == 1.0


def test_shape_mismatch_is_an_error():
    with pytest.raises(ValueError, match="differ in shape"):
        consistency(SCORES, REFERENCE[:2])


def test_metrics_by_category_by_hand():
    ranks = torch.tensor([1, 3, 1, 12, 2])
    out = metrics_by_category(ranks, ["grass", "sky", "grass", None, "sky"])
    assert list(out) == ["grass", "sky", "unknown"]
    assert out["grass"]["num_queries"] == 2 and out["grass"]["R@1"] == 100.0 and out["grass"]["MnR"] == 1.0
    assert out["sky"]["R@1"] == 0.0 and out["sky"]["R@5"] == 100.0 and out["sky"]["MnR"] == 2.5
    assert out["unknown"]["R@10"] == 0.0 and out["unknown"]["R@50"] == 100.0
    weighted = sum(v["num_queries"] * v["R@1"] for v in out.values()) / len(ranks)
    assert weighted == pytest.approx(100.0 * 2 / 5)  # the run's R@1
    assert metrics_by_category(ranks, [None] * 5) == {}
    assert metrics_by_category(ranks, ["0"] * 5) == {}  # one category repeats the run: no breakdown
