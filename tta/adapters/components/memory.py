"""Memories of reliable query-target pairs: HAT-VTR's Reliable Memory and TCR's queue of stable pairs.

* HAT-VTR (Zhang et al., 2026, Sec. 4.3): at step 0 of every batch, the ⌊ρ·b⌋ queries farthest
  from the batch centre (δ_i = ‖q_i − c‖₂, "diversity") are appended with their HSM-selected target; when the
  memory reaches its size it is sorted by δ, largest first, and truncated.
* TCR (Li et al., ICLR 2025): the ⌊ρ·b⌋ pairs with the smallest stability indicator
  SI_i = 2‖q_i − c_i‖ − ‖q_i − q̄‖ − ‖c_i − c̄‖ are appended during the first batches only, and the memory keeps
  the smallest SI overall.

Each entry is the detached tuple (score, query feature, target feature, entropy H_i) plus, when the ground truth is
known, whether the target is the true match (the RM accuracy of the paper's Fig. 10; logged, never used).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from tta.utils.bounds import UNIT, Int, Options, bound

SELECTIONS = ("diversity", "tcr_stable")


@dataclass
class RMConfig(Options):
    """Reliable Memory options (HAT-VTR Sec. 4.3, App. C.1; defaults vs the code: docs/methods/hatvtr.md).

    Attributes:
        size: K_RM, entries kept (code ``max_queue_size``; paper 16).
        size_overrides: per-setting sizes keyed ``<head>-<task>``, e.g. {meanp-t2v: 100} (the code's CLIP4Clip-t2v
            config); null/empty = the paper's single size.
        ratio: ρ, share of each batch appended (code ``con_ratio``).
        selection: ``diversity`` (HAT-VTR code) or ``tcr_stable`` (TCR's indicator).
        renormalize_video_mean: store n(frame mean) instead of the raw frame mean.
        min_one: append max(1, ⌊ρ·b⌋) (fixes an empty memory for b ≤ 3); false = the code's ⌊ρ·b⌋.
    """

    block: ClassVar[str] = "rm"
    size: int = bound(Int(1), 16)
    size_overrides: dict | None = bound(Int(1, null="no override"), default_factory=dict)
    ratio: float = bound(UNIT, 0.3)
    selection: str = "diversity"
    renormalize_video_mean: bool = False
    min_one: bool = True

    def size_for(self, head: str, task: str) -> int:
        size = (self.size_overrides or {}).get(f"{head}-{task}")
        return int(self.size if size is None else size)


def selection_count(batch: int, ratio: float, min_one: bool = True) -> int:
    """⌊ρ·b⌋, or max(1, ⌊ρ·b⌋) with ``min_one``."""
    n = int(ratio * batch)
    return max(1, n) if min_one and batch > 0 else n


class ReliableMemory:
    """A size-bounded memory of (score, query, target, entropy[, correct]) tuples.

    Args:
        size: entries kept.
        ratio: share of each batch appended.
        selection: ``diversity`` (keep the largest δ) or ``tcr_stable`` (keep the smallest SI).
        min_one: append at least one entry per batch.
        max_updates: number of batches that may update the memory after a reset (TCR: 10); None = every batch.
    """

    def __init__(self, size: int = 16, ratio: float = 0.3, selection: str = "diversity", min_one: bool = True,
                 max_updates: int | None = None):
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}")
        self.size, self.ratio, self.selection, self.min_one = int(size), float(ratio), selection, bool(min_one)
        self.max_updates = max_updates
        self.reset()

    def reset(self) -> None:
        self.score = self.query = self.target = self.entropy = self.correct = None
        self.updates = 0

    def __len__(self) -> int:
        return 0 if self.score is None else int(self.score.shape[0])

    @property
    def empty(self) -> bool:
        return len(self) == 0

    @property
    def largest_first(self) -> bool:
        return self.selection == "diversity"

    def indicator(self, query: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """(b,) δ_i (diversity) or SI_i (tcr_stable) of one batch."""
        spread_q = (query - query.mean(0)).norm(dim=1)
        if self.selection == "diversity":
            return spread_q
        spread_t = (target - target.mean(0)).norm(dim=1)
        return 2 * (query - target).norm(dim=1) - spread_q - spread_t

    @torch.no_grad()
    def update(self, query: torch.Tensor, target: torch.Tensor, entropy: torch.Tensor,
               correct: torch.Tensor | None = None) -> torch.Tensor:
        """Append the selected pairs of one batch and truncate; return the (n,) selected batch positions.

        Args:
            query: (b, D) query features (video: frame mean).
            target: (b, D) selected target features (video: frame mean).
            entropy: (b,) H_i of each query (the same quantity as the entropy loss uses).
            correct: (b,) bool, target is the true match (logging only), or None.
        """
        if self.max_updates is not None and self.updates >= self.max_updates:
            return torch.zeros(0, dtype=torch.long, device=query.device)
        self.updates += 1
        score = self.indicator(query, target)
        n = selection_count(query.shape[0], self.ratio, self.min_one)
        order = torch.sort(score, descending=self.largest_first, stable=True).indices[:n]
        new = [score[order], query[order].detach(), target[order].detach(), entropy[order].detach()]
        # the flags arrive on the CPU (ground truth lives there); kept beside the features so one index serves all
        new_correct = correct.to(order.device)[order] if correct is not None else None
        if self.score is None:
            self.score, self.query, self.target, self.entropy = new
            self.correct = new_correct
        else:
            self.score, self.query, self.target, self.entropy = (
                torch.cat([old, x.to(old.device)]) for old, x in zip(
                    (self.score, self.query, self.target, self.entropy), new, strict=True))
            if self.correct is not None and new_correct is not None:
                self.correct = torch.cat([self.correct, new_correct.to(self.correct.device)])
            else:
                self.correct = None
        if len(self) >= self.size:
            keep = torch.sort(self.score, descending=self.largest_first, stable=True).indices[: self.size]
            self.score, self.query, self.target, self.entropy = (
                t[keep] for t in (self.score, self.query, self.target, self.entropy))
            if self.correct is not None:
                self.correct = self.correct[keep]
        return order

    @property
    def max_entropy(self) -> torch.Tensor:
        """E_m = max_k H_k (Eq. 11 threshold)."""
        if self.empty:
            raise RuntimeError("the reliable memory is empty: no entropy threshold E_m (docs/methods/hatvtr.md)")
        return self.entropy.max()

    @property
    def accuracy(self) -> torch.Tensor | float:
        """Share of entries whose target is the true match (Fig. 10): a 0-d tensor on the memory's device (not read
        back here, :mod:`tta.utils.device_values`), NaN when unknown or empty."""
        if self.correct is None or self.empty:
            return float("nan")
        return self.correct.float().mean()

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.score, self.query, self.target, self.entropy)
                   if t is not None)
