"""Hubness metrics of a rectangular (Q, G) score matrix.

Definitions in docs/methods/metrics.md, "Hubness": the k-occurrence N_k(j) of each gallery item (how
often it appears among the k highest-scoring items of a query, ties going to the lower
gallery index) and six statistics of it, following the selection of Lin et al. (2025,
NeighborRetr) used by HAT-VTR (App. C.3):

- skewness (Radovanović et al., 2010), population moments;
- truncated-normal skewness (Tomašev, 2014; scikit-hubness ``k_skewness_truncnorm``);
- Atkinson index, ε = 0.5 (Fischer & Lundtofte, 2020);
- Robin Hood index (Feldbauer et al., 2018);
- antihub rate (Radovanović et al., 2014);
- hub occurrence with threshold h·k (Radovanović et al., 2010);

plus the Gini index and the groupie ratio as extras. All statistics are computed in
float64 over the G gallery items with μ = Q·k/G. The implementation is self-contained
(no scikit-hubness dependency).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch

HUBNESS_KEYS: tuple[str, ...] = (
    "skewness",
    "trunc_skewness",
    "atkinson",
    "robin_hood",
    "antihub",
    "hub_occurrence",
)
#: the k at which runs keep the full statistics (HAT-VTR reports k = 10; its Fig. 2 uses 15)
HUBNESS_KS: tuple[int, ...] = (1, 10, 15)
_DEFAULT_CHUNK = 1024


def _check_k(k: int, num_g: int) -> int:
    """Validate the neighbourhood size against the gallery size."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise ValueError(f"k must be an integer, got {k!r}")
    k = int(k)
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k > num_g:
        raise ValueError(f"k = {k} exceeds the gallery size G = {num_g}; need 1 <= k <= G")
    return k


def stable_topk_mask(rows: torch.Tensor, k: int) -> torch.Tensor:
    """Boolean membership of the stable top-k of each row (ties to the lower index).

    The k-th largest value t of a row is unambiguous; every item above t is selected and the
    remaining slots go to the items equal to t in increasing index order. This equals taking
    the first k items of a stable descending sort, without sorting.

    Args:
        rows: (R, G) floating-point scores without NaN.
        k: Neighbourhood size, 1 <= k <= G.

    Returns:
        (R, G) bool tensor with exactly k True entries per row.
    """
    kth = torch.topk(rows, k, dim=1, largest=True, sorted=True).values[:, k - 1 : k]
    above = rows > kth
    at = rows == kth
    free = k - above.sum(dim=1, keepdim=True)
    return above | (at & (torch.cumsum(at.to(torch.long), dim=1) <= free))


def top_values(rows: torch.Tensor, n: int, block: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """The n largest scores of each row (R, G) without NaN, descending, and their indices: ``torch.topk``'s
    values, and its indices up to the order of tied scores.

    For long rows, the n-th largest of the maxima of blocks of ``block`` items is a lower bound of the n-th
    largest score (n blocks each hold a score at least that large), so only the blocks whose maximum reaches it
    (and the items after the last whole block) can hold the top n: one reduction over the row, then a top-n
    over a few blocks.
    """
    count, width = rows.shape
    blocks = width // block
    # on the CPU, where topk copies every item of a row into its queue; few blocks would leave little out
    if rows.device.type != "cpu" or blocks < 8 * n:
        top = torch.topk(rows, n, dim=1, largest=True, sorted=True)
        return top.values, top.indices
    block_max = rows[:, :blocks * block].unflatten(1, (blocks, block)).amax(dim=2)
    floor = torch.topk(block_max, n, dim=1).values[:, -1]
    within = torch.arange(block, device=rows.device)
    tail = torch.arange(blocks * block, width, device=rows.device)
    values, indices = [], []
    for i in range(count):
        kept = (block_max[i] >= floor[i]).nonzero()[:, 0]
        where = torch.cat([(kept[:, None] * block + within).reshape(-1), tail])
        top = torch.topk(rows[i, where], n, largest=True, sorted=True)
        values.append(top.values)
        indices.append(where[top.indices])
    return torch.stack(values), torch.stack(indices)


def stable_topk_indices(rows: torch.Tensor, k: int) -> torch.Tensor:
    """The stable top-k of each row in order: score descending, ties to the lower gallery index.

    Its first k' <= k columns are the stable top-k' (the members of :func:`stable_topk_mask` at k'), so one
    neighbour list serves every smaller k.

    Args:
        rows: (R, G) floating-point scores without NaN.
        k: Neighbourhood size, 1 <= k <= G.

    Returns:
        (R, k) long tensor of gallery indices.
    """
    # one more than k: where the (k+1)-th score equals the k-th, topk took an arbitrary subset of the items tied
    # at the k-th score and the lowest indices belong to the stable top-k; elsewhere its top k is the stable set
    values, idx = top_values(rows, min(k + 1, rows.shape[1]))
    idx = idx[:, :k]
    if k < rows.shape[1]:
        short = values[:, k] == values[:, k - 1]
    else:
        short = torch.zeros(rows.shape[0], dtype=torch.bool, device=rows.device)
    if bool(short.any()):
        idx = idx.clone()
        idx[short] = stable_topk_mask(rows[short], k).nonzero()[:, 1].view(-1, k)
    idx = idx.sort(dim=1).values
    order = rows.gather(1, idx).sort(dim=1, descending=True, stable=True).indices
    return idx.gather(1, order)


def occurrence_from_neighbours(neighbours: torch.Tensor, num_gallery: int, k: int) -> torch.Tensor:
    """k-occurrence N_k from ordered neighbour lists (:func:`stable_topk_indices` rows of width >= k).

    Returns:
        (G,) long tensor on the CPU summing to R·k; equal to :func:`k_occurrence` of the rows the lists came from.
    """
    if not 1 <= k <= neighbours.shape[1]:
        raise ValueError(f"k = {k} needs neighbour lists of width >= k, got width {neighbours.shape[1]}")
    return torch.bincount(neighbours[:, :k].reshape(-1).cpu(), minlength=num_gallery)


def k_occurrence(sims: torch.Tensor, k: int) -> torch.Tensor:
    """k-occurrence N_k(j): how many queries have gallery item j among their top k.

    Args:
        sims: (Q, G) score matrix, higher is more similar.
        k: Neighbourhood size, 1 <= k <= G.

    Returns:
        (G,) long tensor on the CPU summing to Q·k.

    Raises:
        ValueError: On a non-2-D or empty matrix, NaN scores or k outside [1, G].
    """
    sims = torch.as_tensor(sims)
    if sims.ndim != 2:
        raise ValueError(f"sims must be a 2-D (Q, G) tensor, got shape {tuple(sims.shape)}")
    num_q, num_g = sims.shape
    if num_q == 0 or num_g == 0:
        raise ValueError(f"sims must be non-empty, got shape {tuple(sims.shape)}")
    if not sims.is_floating_point():
        raise ValueError(f"sims must be a floating-point tensor, got dtype {sims.dtype}")
    if bool(torch.isnan(sims).any()):
        raise ValueError("sims contains NaN values")
    return _top_k_counts(sims, _check_k(k, num_g), nan_last=False).cpu()


def k_occurrence_on_device(sims: torch.Tensor, k: int) -> torch.Tensor:
    """:func:`k_occurrence` on the scores' device, reading nothing back (a stream's running counts): unchecked, and a
    NaN score ranks below every other, so that each row still counts exactly k items."""
    return _top_k_counts(sims, k, nan_last=True)


def _top_k_counts(sims: torch.Tensor, k: int, nan_last: bool) -> torch.Tensor:
    """(G,) counts of the stable top-k over row chunks; ``nan_last`` ranks NaN scores last (scores already checked
    for NaN skip that pass)."""
    counts = torch.zeros(sims.shape[1], dtype=torch.long, device=sims.device)
    for start in range(0, sims.shape[0], _DEFAULT_CHUNK):
        rows = sims[start : start + _DEFAULT_CHUNK]
        if nan_last:
            rows = torch.where(rows.isnan(), -math.inf, rows)
        counts += stable_topk_mask(rows, k).sum(dim=0)
    return counts


def occurrence_skewness(occurrence: torch.Tensor, k: int, num_queries: int) -> torch.Tensor:
    """The skewness of :func:`hubness_from_occurrence` as a float64 device value, reading nothing back (NaN when all
    counts are equal): a stream's decision on hubness waits for nothing until it reads its answer."""
    dev = occurrence.double() - k * num_queries / occurrence.numel()
    m2, m3 = (dev**2).mean(), (dev**3).mean()
    return torch.where(m2 > 0, m3 / m2**1.5, math.nan)


def _std_normal_pdf(x: float) -> float:
    return math.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)


def _std_normal_sf_of_neg(a: float) -> float:
    """Φ(−a) = 1 − Φ(a), evaluated through erfc for numerical stability."""
    return 0.5 * math.erfc(a / math.sqrt(2.0))


def _occurrence_vector(N: torch.Tensor | np.ndarray | Sequence[int], k: int, num_queries: int) -> np.ndarray:
    """``N`` as a float64 vector, checked to be a k-occurrence of ``num_queries`` queries."""
    if isinstance(N, torch.Tensor):
        n = N.detach().cpu().to(torch.float64).numpy()
    else:
        n = np.asarray(N, dtype=np.float64)
    if n.ndim != 1 or n.size == 0:
        raise ValueError(f"N must be a non-empty 1-D k-occurrence vector, got shape {n.shape}")
    if k < 1 or num_queries < 1:
        raise ValueError(f"k and num_queries must be >= 1, got k={k}, num_queries={num_queries}")
    if (n < 0).any():
        raise ValueError("N must be non-negative")
    total = float(n.sum())
    if not math.isclose(total, k * num_queries):
        raise ValueError(f"sum(N) = {total:g} does not equal k * num_queries = {k * num_queries}")
    return n


def _skewness(dev: np.ndarray) -> float:
    """Population skewness m3 / m2^1.5 of the deviations from the mean; NaN when they are all 0."""
    m2 = float(np.mean(dev**2))
    m3 = float(np.mean(dev**3))
    return m3 / m2**1.5 if m2 > 0 else float("nan")


def _truncated_skewness(dev: np.ndarray, mu: float) -> float:
    """Skewness of a normal truncated at 0 with the sample's mean and standard deviation (NaN for s = 0, G < 2)."""
    num_g = dev.size
    s = float(np.sqrt(np.sum(dev**2) / (num_g - 1))) if num_g >= 2 else 0.0
    if s <= 0:
        return float("nan")
    a = -mu / s
    return (a * a + 2.0) * _std_normal_pdf(a) / _std_normal_sf_of_neg(a)


def _atkinson(n: np.ndarray, mu: float, eps: float) -> float:
    """Atkinson index with inequality aversion ε (ε = 1: the geometric-mean form, 1 when some N_j = 0)."""
    if eps == 1:
        return 1.0 - float(np.exp(np.mean(np.log(n)))) / mu if (n > 0).all() else 1.0
    power = 1.0 - eps
    return 1.0 - float(np.mean(n**power)) ** (1.0 / power) / mu


def _gini(n: np.ndarray, total: float) -> float:
    """Gini coefficient; Σ_i Σ_j |N_i − N_j| = 2 Σ_i (2i − G − 1) N_(i) over the ascending order statistics."""
    num_g = n.size
    ordered = np.sort(n)
    weights = 2.0 * np.arange(1, num_g + 1) - num_g - 1
    return 2.0 * float(np.sum(weights * ordered)) / (2.0 * num_g * total)


def hubness_from_occurrence(
    N: torch.Tensor | np.ndarray | Sequence[int],
    k: int,
    num_queries: int,
    h: float = 2,
    eps: float = 0.5,
) -> dict[str, float]:
    """Hubness statistics from a k-occurrence vector (formulas of docs/methods/metrics.md).

    Args:
        N: (G,) k-occurrence of each gallery item, summing to ``k * num_queries``.
        k: Neighbourhood size used to compute ``N``.
        num_queries: Q, the number of queries (rows) that produced ``N``.
        h: Hub threshold factor; hubs are items with N_j >= h·k.
        eps: Atkinson inequality-aversion parameter ε (ε = 1 is the geometric-mean form).

    Returns:
        Dict with ``"skewness"``, ``"trunc_skewness"``, ``"atkinson"``, ``"robin_hood"``,
        ``"antihub"``, ``"hub_occurrence"``, ``"gini"``, ``"groupie"`` (floats), ``"num_hubs"``
        (number of hubs) and ``"k"``. Skewness is NaN when all N_j are equal; the truncated
        skewness is NaN when the sample standard deviation is 0 or G < 2.

    Raises:
        ValueError: On a non-1-D or empty ``N``, negative counts, k < 1, Q < 1 or
            ``sum(N) != k * num_queries``.
    """
    n = _occurrence_vector(N, k, num_queries)
    total = float(n.sum())
    num_g = n.size
    mu = k * num_queries / num_g
    dev = n - mu
    hubs = n >= h * k
    skewness, trunc = _skewness(dev), _truncated_skewness(dev, mu)
    atkinson = _atkinson(n, mu, eps)
    robin_hood = 0.5 * float(np.sum(np.abs(dev))) / total
    antihub = float(np.count_nonzero(n == 0)) / num_g
    hub_occurrence = float(n[hubs].sum()) / (k * num_queries)
    gini = _gini(n, total)
    groupie = float(n.max()) / (k * num_queries)

    return {
        "skewness": float(skewness),
        "trunc_skewness": float(trunc),
        "atkinson": float(atkinson),
        "robin_hood": float(robin_hood),
        "antihub": float(antihub),
        "hub_occurrence": float(hub_occurrence),
        "gini": float(gini),
        "groupie": float(groupie),
        "num_hubs": int(np.count_nonzero(hubs)),
        "k": int(k),
    }


def hubness_metrics(sims: torch.Tensor, k: int = 10) -> dict[str, float]:
    """The six hubness metrics (HAT-VTR App. C.3) for a (Q, G) score matrix.

    Args:
        sims: (Q, G) score matrix; rows are queries, columns gallery items.
        k: Neighbourhood size (default 10, the scikit-hubness default), 1 <= k <= G.

    Returns:
        Dict with exactly ``"skewness"``, ``"trunc_skewness"``, ``"atkinson"``,
        ``"robin_hood"``, ``"antihub"`` and ``"hub_occurrence"`` (Python floats; h = 2, ε = 0.5).

    Raises:
        ValueError: On a bad matrix or k outside [1, G].
    """
    occ = k_occurrence(sims, k)
    stats = hubness_from_occurrence(occ, k, num_queries=int(torch.as_tensor(sims).shape[0]))
    return {key: stats[key] for key in HUBNESS_KEYS}
