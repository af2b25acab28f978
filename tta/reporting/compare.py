"""Paired comparisons of two configurations on the same queries: the difference of a recall metric with its
95 % interval and p, from the per-query ranks every run records (``query_ranks.npz``, or the compact copy in a row
file).

Scheme (docs/methods/metrics.md, "Comparisons"): for a cell, arm A (e.g. an adapter) and arm B (source, or
``--baseline``) ran seeds; seed s of every arm saw the same stream (``shift_seed = seed``), so the comparison is
paired by seed and by query. A query's hit is 100 * (rank <= K) for R@K, and the sum of its R@1, R@5 and R@10 hits
for RSUM; D[s, q] = hit_A[s, q] - hit_B[s, q] over the seeds both arms ran and the queries both were scored on,
and the difference is the mean of D. Its interval and p are the variance-components t interval of
:func:`tta.metrics.statistics.paired_interval` (seed and query variance), so p < 0.05 exactly when the interval
excludes 0. Arms whose seed sets differ are compared on their common seeds only (``Comparison.note`` says so);
when both arms' runs are identical query by query across seeds (a stream and method that draw nothing at random)
they are one run each, and the interval is over queries only.

A cell is *better* (worse) only when its interval lies wholly above (below) zero.
"""

from __future__ import annotations

import base64
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tta.metrics.statistics import REPEAT_MARK, holm, paired_interval, pooled_interval

#: metrics a per-query comparison can be made on (a rank cut-off per hit; RSUM sums three)
PAIRED_METRICS = {"R@1": (1,), "R@5": (5,), "R@10": (10,), "R@50": (50,), "RSUM": (1, 5, 10)}


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
        """Query ids made unique (a repeated id gets its occurrence after :data:`REPEAT_MARK`), so runs align query
        by query and the interval still knows which rows are one query."""
        ids = self.query_id.astype(str)
        if len(np.unique(ids)) == len(ids):
            return ids
        seen: dict[str, int] = {}
        out = []
        for q in ids:
            seen[q] = seen.get(q, 0) + 1
            out.append(q if seen[q] == 1 else f"{q}{REPEAT_MARK}{seen[q]}")
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
    """Arm A minus arm B on one cell: the mean of ``d`` (common seeds x common queries, query ids ``keys``)."""

    diff: float
    low: float
    high: float
    p: float
    seeds: tuple  # the seeds the comparison is over (both arms ran them); () when both arms are one run
    seeds_a: tuple
    seeds_b: tuple
    queries: int
    d: np.ndarray = field(repr=False)
    keys: np.ndarray = field(repr=False)

    @property
    def mark(self) -> str:
        """"better" / "worse" only when the interval excludes zero, else "tie"."""
        return "better" if self.low > 0 else "worse" if self.high < 0 else "tie"

    @property
    def runs(self) -> int:
        """How many paired runs the interval is over (1 for a deterministic pair)."""
        return self.d.shape[0]

    @property
    def note(self) -> str | None:
        """What a reader must know about the seeds: compared on common seeds only, or one run."""
        if not self.seeds:
            return "n=1 run (identical across seeds): queries only"
        if set(self.seeds_a) != set(self.seeds_b):
            return f"on seeds {', '.join(map(str, self.seeds))}"
        return None


def aligned_hits(runs_a: list[QueryRanks], runs_b: list[QueryRanks],
                 metric: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(S_A, N) and (S_B, N) hit matrices over the query ids every run of both arms has, in one order, and the ids."""
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
    return np.stack(hits[:len(runs_a)]), np.stack(hits[len(runs_a):]), common


def compare(runs_a: list[QueryRanks], runs_b: list[QueryRanks], metric: str = "R@1", seeds_a=None,
            seeds_b=None) -> Comparison:
    """Arm A against arm B, paired by seed (``seeds_a``/``seeds_b``: the seed of each run; without them, the runs
    pair in order and both arms must have as many) and by query."""
    seeds_a = tuple(range(len(runs_a))) if seeds_a is None else tuple(int(s) for s in seeds_a)
    seeds_b = tuple(range(len(runs_b))) if seeds_b is None else tuple(int(s) for s in seeds_b)
    if len(seeds_a) != len(runs_a) or len(seeds_b) != len(runs_b):
        raise ValueError("give one seed per run")
    hits_a, hits_b, keys = aligned_hits(runs_a, runs_b, metric)
    same = lambda h: bool((h == h[0]).all())  # noqa: E731  (identical across seeds: one run)
    common = tuple(s for s in sorted(set(seeds_a) & set(seeds_b)))
    if (len(runs_a) > 1 or len(runs_b) > 1) and same(hits_a) and same(hits_b):
        d, seeds = hits_a[:1] - hits_b[:1], ()
    elif not common:
        raise ValueError(f"the arms ran no seed in common (seeds {sorted(seeds_a)} against {sorted(seeds_b)}): "
                         "nothing to pair")
    else:
        d = np.stack([hits_a[seeds_a.index(s)] - hits_b[seeds_b.index(s)] for s in common])
        seeds = common
    est = paired_interval(d, keys=keys)
    return Comparison(est.diff, est.low, est.high, est.p, seeds, tuple(sorted(seeds_a)), tuple(sorted(seeds_b)),
                      d.shape[1], d, keys)


def pooled(comparisons: list[Comparison]) -> tuple[float, float, float]:
    """Mean difference over several cells (each weighing the same) and its interval
    (:func:`tta.metrics.statistics.pooled_interval`): a matrix of cells in one number, not a count."""
    est = pooled_interval([(c.d, c.keys) for c in comparisons])
    return est.diff, est.low, est.high


def holm_marks(comparisons: list[Comparison]) -> list[str]:
    """Each comparison's mark when the whole list is one family (Holm-adjusted p < 0.05)."""
    adjusted = holm([c.p for c in comparisons])
    return ["tie" if q >= 0.05 else "better" if c.diff > 0 else "worse" for c, q in zip(comparisons, adjusted,
                                                                                        strict=True)]
