"""Synthetic run directories in the format the runner writes (results.json with failed_rows and cost, and
query_ranks.npz), for report tests that need no model."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np


def write_run(root: Path, *, adapter: str = "source", shift: str = "gaussian", severity: int = 5, seed: int = 42,
              ranks=None, model: str = "clip4clip", task: str = "v2t", failed=None, ms: float = 10.0,
              method_share: float = 0.0, peak_rss_mb: float = 900.0, num_gallery: int = 100,
              shift_seed: int | None = None, with_ranks: bool = True, source_weights: str | None = None,
              raw: tuple[float, float] | None = None, stream: list[tuple[str, int]] | None = None,
              gallery_shift: tuple[str, int] | None = None, config: dict | None = None) -> Path:
    """One run: R@K and the per-query ranks agree (R@1 = 100 * share of rank 1). With ``stream`` (shift, severity
    pairs) it is a continual stream: the ranks are split evenly into its shifts, whose queries repeat the same ids,
    and results.json has their "segments", as the runner writes them. ``gallery_shift``: (name, severity) of a
    shifted gallery; ``config``: the resolved config results.json records (its identity beyond the seed)."""
    ranks = np.asarray(ranks, dtype=np.int32)
    failed = np.zeros(len(ranks), bool) if failed is None else np.asarray(failed, bool)
    gallery = f"_g{gallery_shift[0]}{gallery_shift[1]}" if gallery_shift else ""
    d = root / f"{model}_{task}_{adapter}_{shift}_s{severity}{gallery}_seed{seed}"
    d.mkdir(parents=True)
    rec = {k: float(100 * np.mean(ranks <= k)) for k in (1, 5, 10, 50)}
    res = {"task": task, "model": model, "adapter": adapter, "posthoc": "none", "shift": shift, "severity": severity,
           "data": "synth", "scenario": "qs", "seed": seed, "shift_seed": seed if shift_seed is None else shift_seed,
           "train_data": "synth", "num_queries": len(ranks), "num_gallery": num_gallery,
           "retrieval": {"R@1": rec[1], "R@5": rec[5], "R@10": rec[10], "R@50": rec[50],
                         "MdR": float(np.median(ranks)), "MnR": float(np.mean(ranks))},
           "hubness": {"skewness": 1.0, "k": 10}, "time_s": {"total": 1.0, "stream": 1.0, "adapt": method_share,
                                                          "per_query_ms": ms},
           "failed_rows": int(failed.sum()),
           "cost": {"ms_per_query": ms, "method_share": method_share, "peak_rss_mb": peak_rss_mb, "peak_gpu_mb": None}}
    if source_weights is not None:
        res["source_weights"] = source_weights
    if gallery_shift is not None:
        res["gallery_shift"] = {"name": gallery_shift[0], "severity": gallery_shift[1]}
    if config is not None:
        res["config"] = config
    n_seg = len(stream) if stream else 1
    per = len(ranks) // n_seg
    if stream:
        res.update(scenario="continual", shift="stream", severity=0, num_queries=per)
        res["segments"] = [{"shift": sh, "severity": sev, "failed_rows": 0, "hubness": {"skewness": 1.0 + i, "k": 10},
                            "retrieval": {f"R@{k}": float(100 * np.mean(ranks[i * per:(i + 1) * per] <= k))
                                          for k in (1, 5, 10, 50)}} for i, (sh, sev) in enumerate(stream)]
    if raw is not None:  # a refining method's (R@1, skewness) before refinement
        res["retrieval_raw"], res["hubness_raw"] = {"R@1": raw[0]}, {"skewness": raw[1], "k": 10}
    (d / "results.json").write_text(json.dumps(res))
    if with_ranks:
        np.savez(d / "query_ranks.npz", query_id=np.array([f"video{i % per}" for i in range(len(ranks))]),
                 segment=(np.arange(len(ranks)) // per).astype(np.int16), rank=ranks, failed=failed,
                 num_gallery=np.int64(num_gallery))
    return d


def ranks_with_hits(hits, rng: np.random.Generator, miss_rank: tuple[int, int] = (2, 40)) -> np.ndarray:
    """Ranks whose rank-1 pattern is ``hits`` (the others drawn in ``miss_rank``)."""
    hits = np.asarray(hits, bool)
    return np.where(hits, 1, rng.integers(*miss_rank, size=len(hits))).astype(np.int32)
