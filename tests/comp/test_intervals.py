"""Bootstrap intervals of the VideoComp probe (tta/comp/metrics.py bootstrap_probe): over videos, paired between the
adapted and the source model, and the clip -> video map the segment-mismatch triplets resample by."""

from __future__ import annotations

import numpy as np

from tta.comp.disrupt import CompItem, Event
from tta.comp.metrics import bootstrap_probe
from tta.comp.probe import build_triplets


def test_intervals_cover_the_accuracy_and_shrink_with_more_videos():
    rng = np.random.default_rng(0)
    for n, width in ((100, 25.0), (1000, 8.0)):
        correct = (rng.random(n) < 0.7).astype(int)
        out = bootstrap_probe({"source": {"temp_reorder": correct}}, {"temp_reorder": np.arange(n)}, n)
        lo, hi = out["source"]["accuracy_ci"]["temp_reorder"]
        assert lo < 100 * correct.mean() < hi and hi - lo < width
        assert "difference" not in out


def test_paired_difference_of_identical_models_is_exactly_zero():
    rng = np.random.default_rng(1)
    n = 50
    outcomes = {"temp_reorder": rng.integers(0, 2, n), "seg_mismatch": rng.integers(0, 2, 2 * n)}
    owners = {"temp_reorder": np.arange(n), "seg_mismatch": np.repeat(np.arange(n), 2)}
    out = bootstrap_probe({"adapted": outcomes, "source": outcomes}, owners, n)
    assert out["difference"]["of"] == "adapted - source"
    for name in ("temp_reorder", "seg_mismatch", "comprehensive"):
        assert out["difference"][name] == {"delta": 0.0, "ci": [0.0, 0.0]}
    assert out["adapted"] == out["source"]
    lo, hi = out["source"]["comprehensive_ci"]
    full = 100 * outcomes["temp_reorder"].mean() * outcomes["seg_mismatch"].mean()
    assert lo <= full <= hi


def test_every_triplet_knows_its_video():
    events = tuple(Event(t, k * 2.0, k * 2.0 + 2, action=t, alternatives=("spins",))
                   for k, t in enumerate(("rises", "falls", "bounces")))
    items = [CompItem(f"v{i}", f"/x/v{i}.mp4", 6.0, events, prefix="a ball") for i in range(3)]
    triplets = build_triplets(items, seed=0)
    owners = triplets.owner_of_rows()
    assert owners["temp_reorder"] == [0, 1, 2] and owners["action_replace"] == [0, 1, 2]
    assert owners["seg_mismatch"] == [0, 0, 1, 1, 2, 2]  # two crops per video
    assert len(triplets.owners) == len(triplets.clips)
