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

from tta.metrics.hubness import stable_topk_indices

CONSISTENCY_K = 5


def consistency(sims: torch.Tensor, reference: torch.Tensor, k: int = CONSISTENCY_K) -> dict[str, float | int]:
    """``{"top1_unchanged", "top{k}_overlap", "k", "num_queries"}``: means over the rows of ``sims`` (R, G) against
    ``reference`` (R, G), or None for an empty stream. The dense form of :func:`answer_consistency`."""
    if sims.shape != reference.shape:
        raise ValueError(f"scores {tuple(sims.shape)} and reference {tuple(reference.shape)} differ in shape")
    k = min(k, sims.shape[1])
    return answer_consistency(top_answers(sims, k), top_answers(reference, k))


def top_answers(sims: torch.Tensor, k: int) -> torch.Tensor:
    """(R, k) gallery indices of each row's k best answers, best first (ties to the lower index); -1 in every
    column of a row with non-finite scores."""
    finite = torch.isfinite(sims).all(dim=1)
    out = torch.full((sims.shape[0], k), -1, dtype=torch.long)
    if finite.any():  # answers live on the CPU whatever device scored the rows
        out[finite.cpu()] = stable_topk_indices(sims[finite].double(), k).cpu()
    return out


def answer_consistency(answers: torch.Tensor, reference: torch.Tensor) -> dict[str, float | int]:
    """Consistency from answer lists: ``answers`` (R, k) of the scored rows (-1 rows: failed, counted as changed),
    ``reference`` (R, k') with k' >= k, both best first. Needs O(R k) memory, so runs keep answers, not scores."""
    n, k = answers.shape
    if n == 0:
        return {"top1_unchanged": None, f"top{k}_overlap": None, "k": k, "num_queries": 0}
    reference = reference[:, :k].to(answers.device)
    failed = answers[:, 0] < 0
    same_top1 = (answers[:, 0] == reference[:, 0]) & ~failed
    shared = (answers.unsqueeze(2) == reference.unsqueeze(1)).any(dim=2) & (answers >= 0)
    overlap = shared.sum(dim=1).double() / k
    return {"top1_unchanged": float(same_top1.double().mean()), f"top{k}_overlap": float(overlap.mean()), "k": k,
            "num_queries": n}
