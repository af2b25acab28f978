"""Paired comparisons (tta.reporting.compare) on constructed per-query ranks: pairing by seed and query, common
seeds, deterministic pairs, the interval against scipy's paired t; the compact per-query form of row files."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tta.reporting.compare import QueryRanks, compare


def _runs(hits, ids=None, rank_miss=7):
    hits = np.asarray(hits, bool)
    ids = np.array([f"q{i}" for i in range(len(hits))]) if ids is None else np.asarray(ids)
    return QueryRanks(ids, np.where(hits, 1, rank_miss).astype(np.int32), np.zeros(len(hits), bool), 50)


def test_one_seed_interval_is_the_paired_t_interval_of_scipy():
    rng = np.random.default_rng(3)
    a, b = rng.random(400) < 0.45, rng.random(400) < 0.35
    c = compare([_runs(a)], [_runs(b)], "R@1")
    d = 100.0 * (a.astype(float) - b.astype(float))
    ref = stats.ttest_rel(100.0 * a, 100.0 * b)
    low, high = ref.confidence_interval(0.95)
    assert c.diff == pytest.approx(d.mean()) and c.p == pytest.approx(ref.pvalue)
    assert (c.low, c.high) == (pytest.approx(low), pytest.approx(high)) and c.runs == 1 and c.note is None


def test_seeds_pair_by_seed_id_and_the_interval_sees_the_seed_effect():
    rng = np.random.default_rng(0)
    base = rng.random((3, 500)) < 0.4
    flip = rng.random((3, 500)) < 0.02  # the arms disagree on 2 % of the queries within a seed
    a_runs = [_runs(base[s] ^ flip[s]) for s in range(3)]
    b_runs = [_runs(base[s]) for s in range(3)]
    # pairing by seed id, whatever the order of the runs
    paired = compare(a_runs, b_runs[::-1], "R@1", [0, 1, 2], [2, 1, 0])
    d = 100.0 * ((base ^ flip).astype(float) - base)
    assert paired.diff == pytest.approx(d.mean()) and paired.seeds == (0, 1, 2) and paired.note is None
    # ~10 discordant queries per seed, where pairing seed 0 of one arm with seed 1 of the other sees ~48 %
    mispaired = compare(a_runs, b_runs, "R@1", [0, 1, 2], [1, 2, 0])
    assert paired.high - paired.low < (mispaired.high - mispaired.low) / 3
    # a seed effect (seed 2 of arm A misses 30 more queries everywhere) widens the interval
    shifted = base[2] ^ flip[2]
    shifted[np.flatnonzero(shifted)[:30]] = False
    wide = compare(a_runs[:2] + [_runs(shifted)], b_runs, "R@1", [0, 1, 2], [0, 1, 2])
    assert wide.high - wide.low > 2 * (paired.high - paired.low)


def test_different_seed_sets_are_compared_on_common_seeds_and_say_so():
    rng = np.random.default_rng(1)
    h = rng.random((3, 300)) < 0.5
    c = compare([_runs(h[0]), _runs(h[1]), _runs(h[2])], [_runs(h[1])], "R@1", [0, 1, 2], [1])
    assert c.seeds == (1,) and c.diff == 0 and c.note == "on seeds 1"
    with pytest.raises(ValueError, match="no seed in common"):
        compare([_runs(h[0]), _runs(h[1])], [_runs(h[2])], "R@1", [0, 1], [5])


def test_deterministic_pair_is_one_run_over_queries_only():
    rng = np.random.default_rng(2)
    a, b = rng.random(300) < 0.5, rng.random(300) < 0.45
    c = compare([_runs(a)] * 3, [_runs(b)] * 3, "R@1", [0, 1, 2], [0, 1, 2])
    one = compare([_runs(a)], [_runs(b)], "R@1")
    assert c.runs == 1 and c.seeds == () and "n=1 run" in c.note
    assert (c.low, c.high, c.p) == (one.low, one.high, one.p)


def test_p_agrees_with_the_interval():
    rng = np.random.default_rng(4)
    for shift in (0.0, 0.03, 0.06, 0.1):
        a, b = rng.random((3, 400)) < 0.4 + shift, rng.random((3, 400)) < 0.4
        c = compare([_runs(x) for x in a], [_runs(x) for x in b], "R@1")
        assert (c.p < 0.05) == (c.low > 0 or c.high < 0)


def test_queries_align_by_id():
    rng = np.random.default_rng(0)
    hits = rng.random(50) < 0.5
    ids = np.array([f"q{i}" for i in range(50)])
    perm = rng.permutation(50)
    same = compare([_runs(hits[perm], ids[perm])], [_runs(hits, ids)], "R@1")
    assert same.diff == 0 and same.low == 0 and same.high == 0 and same.p == 1.0 and same.mark == "tie"


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


def test_a_query_asked_again_counts_once_in_the_interval():
    """A continual stream asks each query once per shift: its rows move together, so three copies of one stream
    give the interval of one copy (the same mean, the queries' spread), not a three times narrower one."""
    rng = np.random.default_rng(5)
    a, b = rng.random(300) < 0.45, rng.random(300) < 0.35
    once = compare([_runs(a)], [_runs(b)], "R@1")
    ids = np.tile([f"q{i}" for i in range(300)], 3)
    thrice = compare([_runs(np.tile(a, 3), ids)], [_runs(np.tile(b, 3), ids)], "R@1")
    assert thrice.diff == pytest.approx(once.diff) and thrice.queries == 900
    assert (thrice.low, thrice.high) == (pytest.approx(once.low), pytest.approx(once.high))
    apart = compare([_runs(np.tile(a, 3))], [_runs(np.tile(b, 3))], "R@1")  # 900 distinct queries
    assert apart.high - apart.low < 0.6 * (once.high - once.low)
