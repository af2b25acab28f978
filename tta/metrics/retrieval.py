"""Retrieval metrics: ground-truth ranks, R@K, median and mean rank.

Definitions: docs/methods/metrics.md, "Retrieval". The reference evaluation
(``bingqingzhang/vtr_tta``, ``calculate_evaluation_metrics``) ranks with
``argsort``, whose order for equal scores is unspecified; this module instead
uses a *stable* descending order in which ties go to the lower gallery index:

    rank_i = #{j : s_ij > s_i,gt} + #{j < gt_i : s_ij == s_i,gt} + 1.

Ranks are computed by counting (no sort), chunked over query rows so that a
5000 x 5000 matrix never needs more than a few chunk-sized temporaries.

The median rank follows either the code's ``torch.median`` convention
(``"lower"``, the ⌊(Q+1)/2⌋-th smallest rank) or NumPy's median
(``"mean_of_middle"``, as in X-Pool and CLIP4Clip).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

import torch

logger = logging.getLogger(__name__)

RECALL_KS: tuple[int, ...] = (1, 5, 10, 50)
MEDIAN_CONVENTIONS: tuple[str, ...] = ("lower", "mean_of_middle")
_DEFAULT_CHUNK = 1024
_ROWWISE_MAX = 64  # up to this many rows, ranks_with_failures counts row by row


def _check_sims(sims: torch.Tensor) -> torch.Tensor:
    """Validate a score matrix and return it as a tensor.

    Args:
        sims: (Q, G) real-valued score matrix.

    Returns:
        The same matrix as a ``torch.Tensor``.

    Raises:
        ValueError: If the matrix is not 2-D, is empty, is not floating point or contains NaN.
    """
    sims = torch.as_tensor(sims)
    if sims.ndim != 2:
        raise ValueError(f"sims must be a 2-D (Q, G) tensor, got shape {tuple(sims.shape)}")
    if sims.shape[0] == 0:
        raise ValueError("sims has no queries (Q == 0); metrics are undefined")
    if sims.shape[1] == 0:
        raise ValueError("sims has an empty gallery (G == 0); metrics are undefined")
    if not sims.is_floating_point():
        raise ValueError(f"sims must be a floating-point tensor, got dtype {sims.dtype}")
    if bool(torch.isnan(sims).any()):
        raise ValueError("sims contains NaN values")
    return sims


def check_gt(sims: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Validate ground-truth indices against a (Q, G) score matrix.

    Args:
        sims: (Q, G) validated score matrix.
        gt: (Q,) integer gallery index of the relevant item of each query.

    Returns:
        ``gt`` as an int64 tensor on ``sims.device``.

    Raises:
        ValueError: On a wrong shape, a non-integer dtype or an index outside [0, G).
    """
    gt = torch.as_tensor(gt)
    num_q, num_g = sims.shape
    if gt.ndim != 1 or gt.shape[0] != num_q:
        raise ValueError(
            f"gt must have shape (Q,) = ({num_q},) to match sims {tuple(sims.shape)}, "
            f"got {tuple(gt.shape)}"
        )
    if gt.is_floating_point() or gt.is_complex() or gt.dtype == torch.bool:
        raise ValueError(f"gt must be an integer tensor of gallery indices, got dtype {gt.dtype}")
    gt = gt.to(device=sims.device, dtype=torch.long)
    low, high = int(gt.min()), int(gt.max())
    if low < 0 or high >= num_g:
        raise ValueError(
            f"gt index out of range: values must lie in [0, {num_g - 1}] (G = {num_g}), "
            f"got min {low} and max {high}"
        )
    return gt


def _ranks_and_ties(
    sims: torch.Tensor, gt: torch.Tensor, chunk_size: int = _DEFAULT_CHUNK
) -> tuple[torch.Tensor, int]:
    """Stable ranks of the ground truth and the number of queries tying with it.

    Args:
        sims: (Q, G) validated score matrix.
        gt: (Q,) validated int64 ground-truth indices on ``sims.device``.
        chunk_size: Number of query rows processed at once.

    Returns:
        ``(ranks, ties)``: ranks (Q,) int64 (1 = best) and the number of queries for which
        another gallery item has exactly the ground-truth score.
    """
    num_q, num_g = sims.shape
    col = torch.arange(num_g, device=sims.device)
    ranks = torch.empty(num_q, dtype=torch.long, device=sims.device)
    ties = 0
    for start in range(0, num_q, chunk_size):
        rows = sims[start : start + chunk_size]
        g = gt[start : start + chunk_size]
        target = rows.gather(1, g[:, None])
        higher = (rows > target).sum(dim=1)
        equal = rows == target
        equal_before = (equal & (col[None, :] < g[:, None])).sum(dim=1)
        ranks[start : start + rows.shape[0]] = higher + equal_before + 1
        ties += int((equal.sum(dim=1) > 1).sum())
    return ranks, ties


def gt_ranks(sims: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
    """Rank of each query's ground-truth item under a stable descending order.

    Args:
        sims: (Q, G) score matrix, higher is more similar.
        gt: (Q,) long tensor, gallery index of the relevant item of each query.

    Returns:
        (Q,) long tensor of ranks, 1 = retrieved first. Ties go to the lower gallery index.

    Raises:
        ValueError: On bad shapes, an empty query set, NaN scores or out-of-range ``gt``.
    """
    sims = _check_sims(sims)
    gt = check_gt(sims, gt)
    return _ranks_and_ties(sims, gt)[0]


def count_gt_ties(sims: torch.Tensor, gt: torch.Tensor) -> int:
    """Number of queries for which another gallery item has exactly the ground-truth score.

    Args:
        sims: (Q, G) score matrix.
        gt: (Q,) long tensor of ground-truth gallery indices.

    Returns:
        Count of tied queries (their rank depends on the tie-breaking rule).
    """
    sims = _check_sims(sims)
    gt = check_gt(sims, gt)
    return _ranks_and_ties(sims, gt)[1]


def gt_ranks_multi(sims: torch.Tensor, relevant_mask: torch.Tensor) -> torch.Tensor:
    """Best stable rank over several relevant gallery items per query.

    The first relevant item in the stable descending order is the relevant item with the
    highest score, ties going to the lowest index; its rank is the query's rank.

    Args:
        sims: (Q, G) score matrix.
        relevant_mask: (Q, G) bool tensor, True where the gallery item is relevant.

    Returns:
        (Q,) long tensor of best ranks, 1 = a relevant item is retrieved first.

    Raises:
        ValueError: On a shape mismatch, a non-bool mask or a query without relevant items.
    """
    sims = _check_sims(sims)
    mask = torch.as_tensor(relevant_mask)
    if mask.shape != sims.shape:
        raise ValueError(
            f"relevant_mask must have the same shape as sims {tuple(sims.shape)}, "
            f"got {tuple(mask.shape)}"
        )
    if mask.dtype != torch.bool:
        raise ValueError(f"relevant_mask must be a bool tensor, got dtype {mask.dtype}")
    mask = mask.to(sims.device)
    empty = ~mask.any(dim=1)
    if bool(empty.any()):
        first = int(torch.nonzero(empty)[0, 0])
        raise ValueError(
            f"every query needs at least one relevant gallery item; "
            f"{int(empty.sum())} queries have none (first: query {first})"
        )
    num_g = sims.shape[1]
    col = torch.arange(num_g, device=sims.device)
    best = torch.empty(sims.shape[0], dtype=torch.long, device=sims.device)
    for start in range(0, sims.shape[0], _DEFAULT_CHUNK):
        rows = sims[start : start + _DEFAULT_CHUNK]
        m = mask[start : start + _DEFAULT_CHUNK]
        neg_inf = torch.tensor(float("-inf"), dtype=rows.dtype, device=rows.device)
        masked = torch.where(m, rows, neg_inf)
        top = masked.max(dim=1, keepdim=True).values
        cand = m & (masked == top)
        idx = torch.where(cand, col[None, :], torch.full_like(col[None, :], num_g))
        best[start : start + rows.shape[0]] = idx.min(dim=1).values
    return _ranks_and_ties(sims, best)[0]


def ranks_with_failures(sims: torch.Tensor, gt: torch.Tensor, finite: torch.Tensor,
                        gallery_class: torch.Tensor | None = None) -> torch.Tensor:
    """Ranks of a block of query rows, a row with non-finite scores being a miss at the worst rank G.

    Args:
        sims: (Q, G) score matrix.
        gt: (Q,) relevance class of each query: its gallery index, or with ``gallery_class`` the class that
            marks its relevant items (several per query: the best-ranked one counts, :func:`gt_ranks_multi`).
        finite: (Q,) False for a failed row.
        gallery_class: (G,) relevance class of each gallery item; None when item j's class is j.

    Returns:
        (Q,) long tensor of ranks on ``sims.device``.
    """
    ranks = torch.full((sims.shape[0],), sims.shape[1], dtype=torch.long, device=sims.device)
    # the rows may be on the GPU while the ground truth stays with a CPU accumulator
    finite, gt = finite.to(sims.device), gt.to(sims.device)
    if bool(finite.all()):  # no copy of the rows
        ok, want = sims, gt
    elif bool(finite.any()):
        ok, want = sims[finite], gt[finite]
    else:
        return ranks
    if gallery_class is None and ok.shape[0] <= _ROWWISE_MAX:
        got = ranks_by_row(ok, check_gt(ok, want))
    elif gallery_class is None:
        got = gt_ranks(ok, want)
    else:
        got = gt_ranks_multi(ok, want[:, None] == gallery_class.to(sims.device)[None, :])
    ranks[finite] = got
    return ranks


def ranks_by_row(sims: torch.Tensor, gt: torch.Tensor, rows: list[int] | None = None) -> torch.Tensor:
    """The stable ranks of :func:`_ranks_and_ties` with one comparison pass per row (rows without NaN):
    #{j < gt : s_j >= s_gt} + #{j > gt : s_j > s_gt} + 1 counts the same items. For a few rows (a streamed
    batch), where a (rows, G) boolean temporary and its integer sum would cost more than the loop. ``rows``:
    only these rows (their ranks in that order), without copying them out of ``sims``."""
    counts = []
    picked = range(sims.shape[0]) if rows is None else rows
    for i, g in zip(picked, gt[list(picked)].tolist(), strict=True):
        row = sims[i]
        target = row[g]
        counts.append(torch.count_nonzero(row[:g] >= target) + torch.count_nonzero(row[g + 1:] > target))
    return torch.stack(counts).to(torch.long) + 1


def finite_rows(sims: torch.Tensor) -> torch.Tensor:
    """(Q,) bool: whether each row of ``sims`` holds only finite scores. A row with a NaN or an infinity has a
    non-finite sum; only rows whose sum is not finite (a sum of finite scores may overflow) are checked entry by
    entry, so a finite block costs one reduction."""
    finite = torch.isfinite(sims.sum(dim=1))
    if not bool(finite.all()):
        suspect = (~finite).nonzero()[:, 0]
        finite[suspect] = torch.isfinite(sims[suspect]).all(dim=1)
    return finite


def metrics_from_ranks(ranks: torch.Tensor, median: str = "lower") -> dict[str, float]:
    """R@1/5/10/50 (percent), median and mean rank from a vector of ranks.

    Args:
        ranks: (Q,) integer ranks, 1 = best.
        median: ``"lower"`` (``torch.median``: the ⌊(Q+1)/2⌋-th smallest rank) or
            ``"mean_of_middle"`` (NumPy's median: the mean of the two middle ranks for even Q).

    Returns:
        Dict with exactly the keys ``"R@1"``, ``"R@5"``, ``"R@10"``, ``"R@50"`` (percent),
        ``"MdR"`` and ``"MnR"``.

    Raises:
        ValueError: On an unknown median convention or an empty / non-1-D ``ranks``.
    """
    if median not in MEDIAN_CONVENTIONS:
        raise ValueError(f"median must be one of {MEDIAN_CONVENTIONS}, got {median!r}")
    ranks = torch.as_tensor(ranks)
    if ranks.ndim != 1 or ranks.numel() == 0:
        raise ValueError(f"ranks must be a non-empty 1-D tensor, got shape {tuple(ranks.shape)}")
    r = ranks.detach().to(device="cpu", dtype=torch.float64)
    out: dict[str, float] = {
        f"R@{k}": 100.0 * float((r <= k).to(torch.float64).mean()) for k in RECALL_KS
    }
    sorted_r = torch.sort(r).values
    n = sorted_r.numel()
    if median == "lower":
        out["MdR"] = float(sorted_r[(n + 1) // 2 - 1])
    else:
        out["MdR"] = float((sorted_r[(n - 1) // 2] + sorted_r[n // 2]) / 2.0)
    out["MnR"] = float(r.mean())
    return out


def retrieval_metrics(
    sims: torch.Tensor, gt: torch.Tensor, median: str = "lower"
) -> dict[str, float]:
    """Recall at K, median and mean rank of a 1:1 retrieval score matrix.

    Args:
        sims: (Q, G) score matrix; rows are queries, columns gallery items, higher is better.
        gt: (Q,) long tensor, gallery index of each query's relevant item.
        median: ``"lower"`` (default, the reference code's ``torch.median``) or
            ``"mean_of_middle"`` (NumPy's median).

    Returns:
        Dict with exactly ``"R@1"``, ``"R@5"``, ``"R@10"``, ``"R@50"`` (percent), ``"MdR"`` and
        ``"MnR"``, all Python floats.

    Raises:
        ValueError: On bad shapes, an empty query set, NaN scores, out-of-range ``gt`` or an
            unknown median convention.
    """
    if median not in MEDIAN_CONVENTIONS:
        raise ValueError(f"median must be one of {MEDIAN_CONVENTIONS}, got {median!r}")
    sims = _check_sims(sims)
    gt = check_gt(sims, gt)
    ranks, ties = _ranks_and_ties(sims, gt)
    if ties:
        logger.info(
            "%d of %d queries tie with their ground-truth score (stable tie-break)",
            ties,
            len(ranks),
        )
    return metrics_from_ranks(ranks, median=median)


def rsum(metrics: Mapping[str, float]) -> float:
    """RSUM of one direction: R@1 + R@5 + R@10 (percent points).

    Args:
        metrics: Dict holding at least ``"R@1"``, ``"R@5"`` and ``"R@10"``.

    Returns:
        The sum of the three recalls.
    """
    return float(metrics["R@1"]) + float(metrics["R@5"]) + float(metrics["R@10"])
