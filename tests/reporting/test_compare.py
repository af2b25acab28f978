"""Paired comparisons (tta.reporting.compare) against scipy's own bootstrap, permutation and binomial tests, on
constructed per-query ranks; the compact per-query form of row files."""

from __future__ import annotations

import time

import numpy as np
import pytest
from scipy import stats

from tta.reporting.compare import QueryRanks, bootstrap_difference, compare, sign_flip_test


def _runs(hits, ids=None, rank_miss=7):
    hits = np.asarray(hits, bool)
    ids = np.array([f"q{i}" for i in range(len(hits))]) if ids is None else np.asarray(ids)
    return QueryRanks(ids, np.where(hits, 1, rank_miss).astype(np.int32), np.zeros(len(hits), bool), 50)


def test_paired_bootstrap_interval_matches_scipy_on_one_seed():
    rng = np.random.default_rng(3)
    a, b = rng.random(400) < 0.45, rng.random(400) < 0.35
    c = compare([_runs(a)], [_runs(b)], "R@1", resamples=8000, seed=1)
    d = 100.0 * (a.astype(float) - b.astype(float))
    ref = stats.bootstrap((d,), np.mean, n_resamples=8000, method="percentile", random_state=2,
                          confidence_level=0.95).confidence_interval
    assert c.diff == pytest.approx(d.mean())
    assert c.low == pytest.approx(ref.low, abs=0.8) and c.high == pytest.approx(ref.high, abs=0.8)
    # the same with scipy resampling the two arms as paired samples
    ref2 = stats.bootstrap((100.0 * a, 100.0 * b), lambda x, y: np.mean(x) - np.mean(y), paired=True,
                           n_resamples=8000, method="percentile", random_state=4).confidence_interval
    assert c.low == pytest.approx(ref2.low, abs=0.8) and c.high == pytest.approx(ref2.high, abs=0.8)


def test_sign_flip_test_is_exact_and_equals_scipy_permutation_and_mcnemar():
    a = np.array([1, 1, 1, 0, 1, 1, 0, 1, 1, 1, 0, 1], bool)
    b = np.array([0, 0, 1, 0, 0, 1, 0, 0, 1, 0, 1, 1], bool)
    d = 100.0 * (a.astype(float) - b.astype(float))
    p = sign_flip_test(d, resamples=5000)
    ref = stats.permutation_test((100.0 * a, 100.0 * b), lambda x, y: np.mean(x - y), permutation_type="samples",
                                 n_resamples=np.inf, alternative="two-sided").pvalue
    assert p == pytest.approx(ref, rel=1e-9)
    n10, n01 = int(np.sum(a & ~b)), int(np.sum(~a & b))  # McNemar: a binomial test on the discordant queries
    assert p == pytest.approx(stats.binomtest(n10, n10 + n01, 0.5).pvalue, rel=1e-9)
    assert compare([_runs(a)], [_runs(b)], "R@1", resamples=5000).p == pytest.approx(p)


def test_monte_carlo_sign_flip_agrees_with_scipy():
    rng = np.random.default_rng(5)
    a, b = rng.random(300) < 0.40, rng.random(300) < 0.33
    d = 100.0 * (a.astype(float) - b.astype(float))
    ref = stats.binomtest(int(np.sum(a & ~b)), int(np.sum(a != b)), 0.5).pvalue
    assert sign_flip_test(d, resamples=20000) == pytest.approx(ref, abs=0.01)


def test_queries_align_by_id_and_seeds_are_resampled():
    rng = np.random.default_rng(0)
    hits = rng.random(50) < 0.5
    ids = np.array([f"q{i}" for i in range(50)])
    perm = rng.permutation(50)
    same = compare([_runs(hits[perm], ids[perm])], [_runs(hits, ids)], "R@1", resamples=500)
    assert same.diff == 0 and same.low == 0 and same.high == 0 and same.p == 1.0 and same.mark == "tie"
    # two seeds that disagree widen the interval against one that repeats the same seed twice
    a1, a2 = rng.random(200) < 0.6, rng.random(200) < 0.3
    b = rng.random(200) < 0.45
    spread = compare([_runs(a1), _runs(a2)], [_runs(b)], "R@1", resamples=4000)
    pinned = compare([_runs(a1), _runs(a1)], [_runs(b)], "R@1", resamples=4000)
    assert spread.seeds_a == 2 and spread.high - spread.low > pinned.high - pinned.low


def test_hits_per_metric_and_rsum():
    q = QueryRanks(np.array(["a", "b", "c"]), np.array([1, 4, 12], np.int32), np.zeros(3, bool), 20)
    assert q.hits("R@1").tolist() == [100, 0, 0] and q.hits("R@5").tolist() == [100, 100, 0]
    assert q.hits("RSUM").tolist() == [300, 200, 0]
    with pytest.raises(ValueError, match="MdR"):
        q.hits("MdR")


def test_compact_per_query_form_round_trips():
    rng = np.random.default_rng(1)
    q = QueryRanks(np.array([f"video{i}" for i in range(1000)]), rng.integers(1, 1000, 1000).astype(np.int32),
                   rng.random(1000) < 0.01, 1000, rank_raw=rng.integers(1, 1000, 1000).astype(np.int32))
    back = QueryRanks.decode(q.encode())
    assert (back.query_id == q.query_id).all() and (back.rank == q.rank).all()
    assert (back.failed == q.failed).all() and (back.rank_raw == q.rank_raw).all() and back.num_gallery == 1000


def test_bootstrap_of_1000_queries_and_3_seeds_takes_well_under_a_second():
    rng = np.random.default_rng(2)
    a, b = (rng.random((3, 1000)) < 0.4) * 100.0, (rng.random((3, 1000)) < 0.35) * 100.0
    start = time.perf_counter()
    samples = bootstrap_difference(a, b, 2000, 0)
    assert time.perf_counter() - start < 0.5
    assert samples.shape == (2000,) and abs(samples.mean() - (a.mean() - b.mean())) < 1.0
