"""Streaming evaluation: what each scored batch leaves behind instead of its (B, G) score rows.

:class:`StreamScores` is a torchmetrics ``Metric``: ``update`` takes one batch of score rows, keeps for each row
its ground-truth rank (a non-finite row is a failure: a miss at the worst rank G), whether it failed, and its
ordered stable top-k neighbour list (k = the largest hubness k), then drops the rows. Every retrieval metric is a
function of the ranks and every hubness statistic at k' <= k a function of the k-occurrence, which the first k'
neighbours of each finite row give exactly (:func:`tta.metrics.occurrence_from_neighbours`). The state is
O(R·k) for R scored rows, against O(R·G) for the dense matrix; the G-sized k-occurrence exists only while a
statistic is computed.

Ranks and neighbour lists use the stable order of :mod:`tta.metrics.retrieval` and :mod:`tta.metrics.hubness`
(ties to the lower gallery index), so results equal those of the dense functions bit for bit. Multi-caption
layouts pass the gallery's relevance classes: a query is ranked by its best-ranked relevant item.

The states are lists concatenated across processes (``dist_reduce_fx="cat"``); :meth:`StreamScores.compute`
returns the rows in stream order (segment, then query index), whichever process scored them.
"""

from __future__ import annotations

import torch
from torchmetrics import Metric
from torchmetrics.utilities import dim_zero_cat

from tta.metrics.hubness import occurrence_from_neighbours, stable_topk_indices
from tta.metrics.retrieval import check_gt, finite_rows, ranks_by_row, ranks_with_failures
from tta.utils.device_values import without_sync

STATES = ("index", "segment", "rank", "finite", "neighbours")


def rows_without_sync(sims: torch.Tensor, gt: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
    """(finite, ranks, neighbours) of a batch of 1:1 rows without reading anything back to the host: every row is
    ranked by counting and sorted in full (stable), where the case-by-case path asks the values which case holds.
    The same stable order and failures (rank G, neighbours -1), so the same results; on a GPU a batch's full sort
    costs less than stalling the stream."""
    gt = gt.to(sims.device)
    finite = torch.isfinite(sims).all(dim=1)
    target = sims.gather(1, gt[:, None])
    before = torch.arange(sims.shape[1], device=sims.device)[None, :] < gt[:, None]
    rank = (sims > target).sum(dim=1) + ((sims == target) & before).sum(dim=1) + 1
    ranks = torch.where(finite, rank, sims.shape[1])
    order = torch.sort(sims, dim=1, descending=True, stable=True).indices[:, :k]
    return finite, ranks, torch.where(finite[:, None], order, -1)


class StreamScores(Metric):
    """Per-row outcome of a scored query stream: ranks, failures and top-k neighbour lists.

    Args:
        gt: (Q,) relevance class of each stream query (its gallery index in 1:1 layouts).
        num_gallery: G, the gallery size.
        gallery_class: (G,) relevance class of each gallery item (multi-caption v2t); None when item j's is j.
        k: width of the neighbour lists kept per row (capped at G).
        sync_free: score 1:1 rows with :func:`rows_without_sync` (None: when the rows are off the CPU).
    """

    full_state_update = False
    higher_is_better = None

    def __init__(self, gt: torch.Tensor, num_gallery: int, gallery_class: torch.Tensor | None = None, k: int = 15,
                 sync_free: bool | None = None):
        super().__init__()
        self.sync_free = sync_free  # 1:1 rows by rows_without_sync; None = off the CPU (same results either way)
        self.num_gallery = int(num_gallery)
        self.k = min(int(k), self.num_gallery)
        self.register_buffer("gt", torch.as_tensor(gt, dtype=torch.long), persistent=False)
        self.register_buffer("gallery_class", None if gallery_class is None
                             else torch.as_tensor(gallery_class, dtype=torch.long), persistent=False)
        for name in STATES:
            self.add_state(name, default=[], dist_reduce_fx="cat")

    def update(self, sims: torch.Tensor, index: torch.Tensor, segment: int = 0) -> None:
        """Add one batch: ``sims`` (B, G) scores of the stream queries ``index`` (B,) in stream ``segment``."""
        if sims.shape[1] != self.num_gallery:
            raise ValueError(f"score rows have {sims.shape[1]} gallery columns, the stream has {self.num_gallery}")
        sims = sims.detach()
        index = index.to(device=self.gt.device, dtype=torch.long)
        if self.gallery_class is None and without_sync(sims, self.sync_free):
            finite, ranks, neighbours = rows_without_sync(sims, self.gt[index], self.k)
        else:
            finite, ranks, neighbours = self._rows_by_cases(sims, self.gt[index])
        device = self.gt.device
        self.index.append(index)
        self.segment.append(torch.full_like(index, int(segment)))
        self.rank.append(ranks.to(device))
        self.finite.append(finite.to(device))
        self.neighbours.append(neighbours.reshape(-1).to(device))  # flat: one-dimensional states gather as rows

    def _rows_by_cases(self, sims: torch.Tensor, gt: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """(finite, ranks, neighbours) of a batch, each case at its own cost (the CPU's path: a finite block costs one
        reduction and a top-k; reading which case holds synchronises a GPU)."""
        finite = finite_rows(sims)
        if bool(finite.all()) and self.gallery_class is None:  # no copy of the rows
            neighbours = stable_topk_indices(sims, self.k)
            return finite, self._ranks_from_lists(sims, neighbours, gt), neighbours
        ranks = ranks_with_failures(sims, gt, finite, self.gallery_class)
        neighbours = torch.full((sims.shape[0], self.k), -1, dtype=torch.long, device=sims.device)
        if bool(finite.any()):
            neighbours[finite] = stable_topk_indices(sims[finite], self.k)
        return finite, ranks, neighbours

    @staticmethod
    def _ranks_from_lists(sims: torch.Tensor, neighbours: torch.Tensor, gt: torch.Tensor) -> torch.Tensor:
        """Ranks of finite 1:1 rows: a ground truth in its row's stable neighbour list ranks at its position
        there (the list is the stable order); only the other rows are counted over the gallery."""
        gt = check_gt(sims, gt)
        hit = neighbours == gt[:, None]
        ranks = hit.to(torch.long).argmax(dim=1) + 1
        missed = (~hit.any(dim=1)).nonzero()[:, 0].tolist()
        if missed:
            ranks[missed] = ranks_by_row(sims, gt, missed)
        return ranks

    def compute(self) -> dict[str, torch.Tensor]:
        """The rows in stream order: ``index``, ``segment``, ``rank`` (R,), ``finite`` (R,) bool and
        ``neighbours`` (R, k) (-1 in a failed row), on the CPU."""
        if not self.index:
            raise RuntimeError("no batch was scored")
        rows = {name: dim_zero_cat(getattr(self, name)).cpu() for name in STATES}
        rows["neighbours"] = rows["neighbours"].long().view(-1, self.k)
        rows["finite"] = rows["finite"].bool()
        order = torch.argsort(rows["segment"].long() * (int(rows["index"].max()) + 1) + rows["index"].long(),
                              stable=True)
        return {name: value[order] for name, value in rows.items()}

    def occurrence(self, k: int) -> torch.Tensor | None:
        """(G,) k-occurrence of the finite rows this process scored so far (no sync: the running curves of one
        process), or None before the first finite row."""
        if not self.index:
            return None
        finite = dim_zero_cat(self.finite).bool()
        if not bool(finite.any()):
            return None
        neighbours = dim_zero_cat(self.neighbours).view(-1, self.k)[finite]
        return occurrence_from_neighbours(neighbours, self.num_gallery, k)
