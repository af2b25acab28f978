"""Per-query consistency of a scored stream with a reference ranking (docs/methods/metrics.md, "Consistency").

Shirnin et al. (Sec. IV) compare a model's answers on perturbed inputs with its answers on the clean ones (w2v,
accuracy change); for retrieval the answer is the ranking. For each query i with scored row s_i and reference row
c_i (the clean queries of the same model):

* top-1 unchanged: 1[argmax s_i = argmax c_i];
* top-k overlap: |T_k(s_i) ∩ T_k(c_i)| / k, with T_k the k highest-scoring gallery items (ties by index).

A row with non-finite scores (a diverged method) counts as changed (agreement 0, overlap 0).
"""

from __future__ import annotations

import torch

from tta.metrics.hubness import stable_topk_mask

CONSISTENCY_K = 5


def consistency(sims: torch.Tensor, reference: torch.Tensor, k: int = CONSISTENCY_K) -> dict[str, float | int]:
    """``{"top1_unchanged", "top{k}_overlap", "k", "num_queries"}``: means over the rows of ``sims`` (R, G) against
    ``reference`` (R, G), or None for an empty stream."""
    if sims.shape != reference.shape:
        raise ValueError(f"scores {tuple(sims.shape)} and reference {tuple(reference.shape)} differ in shape")
    k = min(k, sims.shape[1])
    n = sims.shape[0]
    finite = torch.isfinite(sims).all(dim=1)
    if n == 0:
        return {"top1_unchanged": None, f"top{k}_overlap": None, "k": k, "num_queries": 0}
    ref = reference.double()
    same_top1 = torch.zeros(n, dtype=torch.bool)
    overlap = torch.zeros(n, dtype=torch.float64)
    if finite.any():
        rows, clean = sims[finite].double(), ref[finite]
        same_top1[finite] = (_top1(rows) == _top1(clean)).cpu()
        overlap[finite] = ((stable_topk_mask(rows, k) & stable_topk_mask(clean, k)).sum(dim=1).double() / k).cpu()
    return {"top1_unchanged": float(same_top1.double().mean()), f"top{k}_overlap": float(overlap.mean()), "k": k,
            "num_queries": n}


def _top1(rows: torch.Tensor) -> torch.Tensor:
    """Index of each row's maximum, the lowest index among ties (as the ranks' stable sort)."""
    return stable_topk_mask(rows, 1).float().argmax(dim=1)
