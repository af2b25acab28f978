"""Paired comparisons of two configurations on the same queries: the difference of a recall metric with a
hierarchical bootstrap interval and a paired sign-flip test, from the per-query ranks every run records
(``query_ranks.npz``, or the compact copy in a row file).

Scheme (docs/methods/metrics.md, "Comparisons"): for a cell (data, task, scenario, backbone, shift, severity), arm A (e.g.
an adapter) has S_A runs (seeds), arm B (source, or ``--baseline``) S_B runs, all scored on the same queries. A
query's hit is 100 * (rank <= K) for R@K, and the sum of its R@1, R@5 and R@10 hits for RSUM, so the mean of the
hits over the queries is the run's metric. The difference is mean_A - mean_B (each the mean over its seeds).

* Interval: each of B resamples draws the seeds of each arm with replacement (independently: a seed is the
  method's own randomness), then the queries with replacement, the same query ids for both arms (paired); the
  95 % interval is the 2.5 and 97.5 percentiles of the resampled differences. With one seed per arm this is the
  ordinary paired percentile bootstrap over queries.
* Test: the sign-flip (paired permutation) test of the per-query differences d_q (each arm's hit averaged over its
  seeds): under "no difference" the sign of every d_q is exchangeable; p = P(|mean of flipped d| >= |mean d|),
  exact when 2^(non-zero d_q) <= the number of resamples, else Monte Carlo with the +1 correction. On one seed and
  hit@1 this is the exact McNemar test (a binomial test on the discordant queries).

A cell is *better* (worse) only when its interval lies wholly above (below) zero. Everything is vectorised in
numpy with a fixed generator seed, so the same inputs give the same intervals.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

#: metrics a per-query comparison can be made on (a rank cut-off per hit; RSUM sums three)
PAIRED_METRICS = {"R@1": (1,), "R@5": (5,), "R@10": (10,), "R@50": (50,), "RSUM": (1, 5, 10)}
RESAMPLES = 2000
BOOTSTRAP_SEED = 0
LEVEL = 0.95


@dataclass
class QueryRanks:
    """The per-query outcome of one run: ``query_id`` (str), 1-based ``rank`` of the relevant item, ``failed``
    (non-finite scores, scored as a miss) and optionally ``rank_raw`` (before score refinement)."""

    query_id: np.ndarray
    rank: np.ndarray
    failed: np.ndarray
    num_gallery: int
    rank_raw: np.ndarray | None = None
    segment: np.ndarray | None = field(default=None, repr=False)

    @classmethod
    def load(cls, run_dir: str | Path) -> QueryRanks | None:
        """``<run_dir>/query_ranks.npz`` (no pickle), or None when the run has none."""
        path = Path(run_dir) / "query_ranks.npz"
        if not path.exists():
            return None
        with np.load(path, allow_pickle=False) as z:
            return cls(z["query_id"].astype(str), z["rank"].astype(np.int32), z["failed"].astype(bool),
                       int(z["num_gallery"]), z["rank_raw"].astype(np.int32) if "rank_raw" in z else None,
                       z["segment"].astype(np.int16) if "segment" in z else None)

    def hits(self, metric: str = "R@1") -> np.ndarray:
        """Per-query contribution to ``metric`` (their mean is the run's value), float64."""
        if metric not in PAIRED_METRICS:
            raise ValueError(f"no per-query form of {metric}; paired comparisons take {', '.join(PAIRED_METRICS)}")
        return sum(100.0 * (self.rank <= k) for k in PAIRED_METRICS[metric])

    def keys(self) -> np.ndarray:
        """Query ids made unique (a repeated id gets "#<occurrence>"), so runs align query by query."""
        ids = self.query_id.astype(str)
        if len(np.unique(ids)) == len(ids):
            return ids
        seen: dict[str, int] = {}
        out = []
        for q in ids:
            seen[q] = seen.get(q, 0) + 1
            out.append(q if seen[q] == 1 else f"{q}#{seen[q]}")
        return np.array(out)

    def select(self, mask: np.ndarray) -> QueryRanks:
        """The queries where ``mask`` is true (e.g. one shift of a continual stream: ``segment == i``)."""
        pick = lambda a: None if a is None else a[mask]  # noqa: E731
        return QueryRanks(self.query_id[mask], self.rank[mask], self.failed[mask], self.num_gallery,
                          pick(self.rank_raw), pick(self.segment))

    # --- the compact form of a row file ("per_query", docs/outputs.md) ----------------------------------------
    def encode(self) -> dict:
        """JSON-ready compact copy: ids newline-joined, ranks little-endian int32 and failed flags bit-packed,
        each zlib-compressed and base64-encoded."""
        pack = lambda b: base64.b64encode(zlib.compress(b, 9)).decode("ascii")  # noqa: E731
        out = {"n": len(self.rank), "num_gallery": self.num_gallery,
               "query_id": pack("\n".join(self.query_id.astype(str)).encode()),
               "rank": pack(self.rank.astype("<i4").tobytes()),
               "failed": pack(np.packbits(self.failed.astype(bool)).tobytes())}
        if self.rank_raw is not None:
            out["rank_raw"] = pack(self.rank_raw.astype("<i4").tobytes())
        if self.segment is not None:
            out["segment"] = pack(self.segment.astype("<i2").tobytes())
        return out

    @classmethod
    def decode(cls, d: dict) -> QueryRanks:
        unpack = lambda s: zlib.decompress(base64.b64decode(s))  # noqa: E731
        n = int(d["n"])
        ids = np.array(unpack(d["query_id"]).decode().split("\n") if n else [], dtype=str)
        rank = np.frombuffer(unpack(d["rank"]), dtype="<i4").astype(np.int32)
        failed = np.unpackbits(np.frombuffer(unpack(d["failed"]), dtype=np.uint8))[:n].astype(bool)
        raw = np.frombuffer(unpack(d["rank_raw"]), dtype="<i4").astype(np.int32) if d.get("rank_raw") else None
        seg = np.frombuffer(unpack(d["segment"]), dtype="<i2").astype(np.int16) if d.get("segment") else None
        if not (len(ids) == len(rank) == len(failed) == n):
            raise ValueError(f"per_query data of {n} queries holds {len(ids)} ids and {len(rank)} ranks")
        return cls(ids, rank, failed, int(d["num_gallery"]), raw, seg)


@dataclass
class Comparison:
    """Arm A minus arm B on one cell. ``samples``: the bootstrap differences (for pooling cells)."""

    diff: float
    low: float
    high: float
    p: float
    seeds_a: int
    seeds_b: int
    queries: int
    samples: np.ndarray = field(repr=False)

    @property
    def mark(self) -> str:
        """"better" / "worse" only when the interval excludes zero, else "tie"."""
        return "better" if self.low > 0 else "worse" if self.high < 0 else "tie"


def aligned_hits(runs_a: list[QueryRanks], runs_b: list[QueryRanks], metric: str) -> tuple[np.ndarray, np.ndarray]:
    """(S_A, N) and (S_B, N) hit matrices over the query ids every run of both arms has, in one order."""
    keys = [r.keys() for r in runs_a + runs_b]
    common = keys[0]
    for k in keys[1:]:
        common = common[np.isin(common, k)]
    if len(common) == 0:
        raise ValueError("the two arms share no query id: they were not scored on the same queries")

    def take(run: QueryRanks, k: np.ndarray) -> np.ndarray:
        order = np.argsort(k, kind="stable")
        return run.hits(metric)[order[np.searchsorted(k[order], common)]]

    hits = [take(r, k) for r, k in zip(runs_a + runs_b, keys, strict=True)]
    return np.stack(hits[:len(runs_a)]), np.stack(hits[len(runs_a):])


def _counts(rng: np.random.Generator, resamples: int, n: int) -> np.ndarray:
    """(resamples, n) multiplicities of n items drawn with replacement, one row per resample."""
    idx = rng.integers(0, n, size=(resamples, n)) + n * np.arange(resamples)[:, None]
    return np.bincount(idx.ravel(), minlength=resamples * n).reshape(resamples, n).astype(np.float64)


def bootstrap_difference(hits_a: np.ndarray, hits_b: np.ndarray, resamples: int = RESAMPLES,
                         seed: int = BOOTSTRAP_SEED) -> np.ndarray:
    """Resampled differences of the means (seeds of each arm, then queries shared by both); (resamples,)."""
    hits_a, hits_b = np.atleast_2d(hits_a), np.atleast_2d(hits_b)
    rng = np.random.default_rng(seed)
    n = hits_a.shape[1]
    per_query = []
    for hits in (hits_a, hits_b):  # (resamples, N): each query's hit averaged over the resampled seeds
        s = hits.shape[0]
        per_query.append(hits.mean(0)[None, :] if s == 1 else _counts(rng, resamples, s) @ hits / s)
    weights = _counts(rng, resamples, n)
    return ((per_query[0] - per_query[1]) * weights).sum(1) / n


def sign_flip_test(d: np.ndarray, resamples: int = RESAMPLES, seed: int = BOOTSTRAP_SEED) -> float:
    """Two-sided p of the paired sign-flip test on per-query differences ``d`` (see the module docstring)."""
    d = np.asarray(d, dtype=np.float64)
    nz = d[d != 0]
    observed = abs(nz.sum())
    if nz.size == 0:
        return 1.0
    tol = 1e-9 * max(1.0, observed)
    if 2 ** nz.size <= resamples:  # exact: every sign pattern
        signs = 1 - 2 * ((np.arange(2 ** nz.size)[:, None] >> np.arange(nz.size)) & 1)
        return float(np.mean(np.abs(signs @ nz) >= observed - tol))
    signs = np.random.default_rng(seed).integers(0, 2, size=(resamples, nz.size), dtype=np.int8) * 2 - 1
    return float((1 + np.sum(np.abs(signs @ nz) >= observed - tol)) / (1 + resamples))


def compare(runs_a: list[QueryRanks], runs_b: list[QueryRanks], metric: str = "R@1", resamples: int = RESAMPLES,
            seed: int = BOOTSTRAP_SEED) -> Comparison:
    """Arm A (runs over seeds) against arm B on their common queries."""
    hits_a, hits_b = aligned_hits(runs_a, runs_b, metric)
    samples = bootstrap_difference(hits_a, hits_b, resamples, seed)
    lo, hi = np.percentile(samples, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    d = hits_a.mean(0) - hits_b.mean(0)
    return Comparison(float(d.mean()), float(lo), float(hi), sign_flip_test(d, resamples, seed), len(runs_a),
                      len(runs_b), hits_a.shape[1], samples)


def pooled(comparisons: list[Comparison]) -> tuple[float, float, float]:
    """Mean difference over several cells and its interval (the cells' bootstrap samples averaged: each cell is
    resampled on its own, the cells are fixed strata)."""
    samples = np.mean([c.samples for c in comparisons], axis=0)
    lo, hi = np.percentile(samples, [100 * (1 - LEVEL) / 2, 100 * (1 + LEVEL) / 2])
    return float(np.mean([c.diff for c in comparisons])), float(lo), float(hi)
