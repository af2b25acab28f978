"""Hubness Suppression Memory (HSM) of HAT-VTR (Zhang et al., 2026, Sec. 4.2, Eq. 5-6): operator and banks.

For a stacked score matrix Z (R, G) the operator is

    H(Z) = m · Z ⊙ softmax_col(α Z) + (1 − m) · Z ⊙ softmax_row(β Z)

(column softmax over all R rows of one gallery item, row softmax over the gallery). The bank holds raw, detached
similarity rows of earlier batches; a call refines the current batch's rows of H([bank; S]). Two exact
implementations of the bank are provided:

* ``direct`` — stores the raw rows and re-softmaxes the whole stack on every call, as the reference code does
  (O(R·G) per call, R growing with the stack);
* ``incremental`` — keeps, per gallery column, only the log-sum-exp of α·z over the stored rows. The row term
  needs the current rows only, and the column weight of a current entry is exp(α z − lse_j) where lse_j combines
  the stored blocks' statistics with the current rows'. FIFO eviction is exact: block statistics live in a
  two-stack sliding-window aggregate (log-add-exp is associative but has no exact inverse), so each block is
  combined a constant number of times and a call costs amortised O(B·G) whatever the history length.

The warm-up rule (first batch of a shift: argmax targets, unrefined output) belongs to
:class:`HubnessSuppressionMemory`, not to the operator.
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import ClassVar

import torch

from tta.metrics.hubness import k_occurrence_on_device
from tta.utils.bounds import POSITIVE, UNIT, Int, Options, Real, bound
from tta.utils.device_values import ratio

log = logging.getLogger(__name__)

IMPLEMENTATIONS = ("incremental", "direct")
_COLUMN_BLOCK = 8192  # columns per block of the incremental bank's float64 scratch (1 MB at 16 rows)
BANK_DEVICES = ("scores", "cpu")


def hsm_operator(stacked: torch.Tensor, alpha: float = 100.0, beta: float = 10.0, m: float = 0.5) -> torch.Tensor:
    """H(Z) of Eq. 6 for every row of a stacked matrix ``stacked`` (R, G) -> (R, G)."""
    w_col = torch.softmax(alpha * stacked, dim=0)
    w_row = torch.softmax(beta * stacked, dim=1)
    return m * stacked * w_col + (1.0 - m) * stacked * w_row


def hsm_refine(history: torch.Tensor | None, current: torch.Tensor, alpha: float = 100.0, beta: float = 10.0,
               m: float = 0.5) -> torch.Tensor:
    """Refine the current rows with the HSM operator (Eq. 5-6), the current batch stacked last.

    Args:
        history: (M, G) earlier raw similarity rows (M may be 0, or None).
        current: (B, G) raw similarity rows of the current batch.
        alpha: inverse temperature of the column (gallery-centric) softmax.
        beta: inverse temperature of the row (query-centric) softmax.
        m: mixing weight of the column term.

    Returns:
        (B, G) refined rows of the current batch (differentiable in ``current``).
    """
    if history is None or history.shape[0] == 0:
        stacked = current
    else:
        stacked = torch.cat([history.to(device=current.device, dtype=current.dtype), current], dim=0)
    w_col = torch.softmax(alpha * stacked, dim=0)[-current.shape[0]:]
    w_row = torch.softmax(beta * current, dim=1)
    return m * current * w_col + (1.0 - m) * current * w_row


@dataclass
class HSMConfig(Options):
    """HSM hyper-parameters (HAT-VTR Sec. 4.2, App. C.1; defaults vs the code: docs/methods/hsm.md)."""

    block: ClassVar[str] = "hsm"
    alpha: float = bound(POSITIVE, 100.0)
    beta: float = bound(POSITIVE, 10.0)
    m: float = bound(UNIT, 0.5)
    capacity: int | str | None = bound(Int(1, null="unbounded", words=("gallery_fraction",)), 100)
    gallery_fraction: float = bound(Real(0, 1, lo_open=True), 0.1)
    capacity_includes_current: bool = False
    refine_first_batch: bool = False
    enabled_select: bool = True
    enabled_refine: bool = True
    implementation: str = "incremental"
    device: str = "scores"

    def __post_init__(self):
        super().__post_init__()
        if self.implementation not in IMPLEMENTATIONS:
            raise ValueError(f"hsm.implementation must be one of {IMPLEMENTATIONS}, got {self.implementation!r}")
        if self.device not in BANK_DEVICES:
            raise ValueError(f"hsm.device must be one of {BANK_DEVICES}, got {self.device!r}")

    def bank_capacity(self, num_gallery: int) -> int | None:
        """Batch matrices kept in the bank after appending (None = unbounded)."""
        if self.capacity is None:
            return None
        k = max(1, int(self.gallery_fraction * num_gallery)) if self.capacity == "gallery_fraction" else int(self.capacity)
        return k - 1 if self.capacity_includes_current else k


class HSMBank(ABC):
    """A FIFO bank of raw similarity blocks (one block = one batch matrix) and the HSM refinement over it.

    Args:
        alpha, beta, m: Eq. 6.
        capacity: blocks kept after appending (None = unbounded, 0 = always empty).
        device: where the bank lives (None = the device of the first appended rows).
        track_k: also keep the bank's exact k-occurrence counts (0 = off), used by the hubness hooks.
    """

    def __init__(self, alpha: float = 100.0, beta: float = 10.0, m: float = 0.5, capacity: int | None = 100,
                 device: torch.device | str | None = None, track_k: int = 0):
        self.alpha, self.beta, self.m = float(alpha), float(beta), float(m)
        self.capacity = capacity
        self.device = torch.device(device) if device is not None else None
        self.track_k = int(track_k)
        self.reset()

    def reset(self) -> None:
        self._sizes: deque[int] = deque()
        self._occ_blocks: deque[torch.Tensor] = deque()
        self.occurrence: torch.Tensor | None = None
        self._reset_storage()

    @abstractmethod
    def _reset_storage(self) -> None:
        """Implemented by :class:`DirectBank` and :class:`IncrementalBank`."""

    def __len__(self) -> int:
        return len(self._sizes)

    @property
    def num_rows(self) -> int:
        return sum(self._sizes)

    def _where(self, rows: torch.Tensor) -> torch.device:
        if self.device is None:
            self.device = rows.device
        return self.device

    def append(self, rows: torch.Tensor) -> None:
        """Store the detached raw rows (B, G) of one batch, then evict the oldest blocks beyond capacity."""
        rows = rows.detach().to(self._where(rows))
        self._push(rows)
        self._sizes.append(rows.shape[0])
        if self.track_k:
            occ = k_occurrence_on_device(rows.float(), min(self.track_k, rows.shape[1]))
            self._occ_blocks.append(occ)
            self.occurrence = occ.clone() if self.occurrence is None else self.occurrence + occ
        while self.capacity is not None and len(self._sizes) > self.capacity:
            self._pop_oldest()
            self._sizes.popleft()
            if self.track_k:
                self.occurrence -= self._occ_blocks.popleft()

    def recent_occurrence(self, blocks: int) -> tuple[torch.Tensor, int] | None:
        """The k-occurrence counts of the newest ``blocks`` blocks and their row count (None when not tracked or
        empty): two banks compared over equally many blocks compare the same number of rows."""
        if not self.track_k or blocks < 1 or not self._occ_blocks:
            return None
        blocks = min(blocks, len(self._occ_blocks))
        occ = torch.stack(list(self._occ_blocks)[-blocks:]).sum(dim=0)
        return occ, sum(list(self._sizes)[-blocks:])

    def refine(self, current: torch.Tensor) -> torch.Tensor:
        """Current rows of H([bank; current]) (B, G), on ``current``'s device (differentiable in ``current``)."""
        if self.device is not None and self.device != current.device:
            return self._refine(current.to(self.device)).to(current.device)
        return self._refine(current)

    @abstractmethod
    def nbytes(self) -> int:
        """Implemented by :class:`DirectBank` and :class:`IncrementalBank`."""

    @abstractmethod
    def _push(self, rows: torch.Tensor) -> None:
        """Implemented by :class:`DirectBank` and :class:`IncrementalBank`."""

    @abstractmethod
    def _pop_oldest(self) -> None:
        """Implemented by :class:`DirectBank` and :class:`IncrementalBank`."""

    @abstractmethod
    def _refine(self, current: torch.Tensor) -> torch.Tensor:
        """Implemented by :class:`DirectBank` and :class:`IncrementalBank`."""


class DirectBank(HSMBank):
    """Stores the raw rows and re-softmaxes the whole stack per call (the reference code's computation)."""

    def _reset_storage(self) -> None:
        self._blocks: deque[torch.Tensor] = deque()

    def _push(self, rows: torch.Tensor) -> None:
        self._blocks.append(rows)

    def _pop_oldest(self) -> None:
        self._blocks.popleft()

    def history(self) -> torch.Tensor | None:
        return torch.cat(list(self._blocks)) if self._blocks else None

    def _refine(self, current: torch.Tensor) -> torch.Tensor:
        return hsm_refine(self.history(), current, self.alpha, self.beta, self.m)

    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self._blocks)


class IncrementalBank(HSMBank):
    """Per-column log-sum-exp statistics in a two-stack sliding window (exact FIFO eviction, amortised O(B·G)).

    ``_back`` holds the newest blocks' statistics and their running combination; ``_front`` holds, oldest on
    top, suffix combinations of the older blocks. The statistics of the whole bank are the combination of the
    front top and the back aggregate; evicting pops the front (refilled from the back when empty).
    """

    def _reset_storage(self) -> None:
        self._back: list[torch.Tensor] = []
        self._back_agg: torch.Tensor | None = None
        self._front: list[torch.Tensor] = []
        # (rows, their version, their column statistic) of the last no-grad refine: append reuses the statistic
        self._last: tuple[torch.Tensor, int, torch.Tensor] | None = None
        self._work: dict[str, torch.Tensor] = {}  # (B, G) scratch buffers of the no-grad refine

    def _dtype(self, device: torch.device) -> torch.dtype:
        return torch.float32 if device.type == "mps" else torch.float64

    def _buffer(self, name: str, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> torch.Tensor:
        """A scratch tensor kept between calls (a fresh (B, G) allocation page-faults on every call)."""
        buf = self._work.get(name)
        if buf is None or buf.shape != shape or buf.dtype != dtype or buf.device != device:
            buf = self._work[name] = torch.empty(shape, dtype=dtype, device=device)
        return buf

    def _columns(self, rows: torch.Tensor, refined: torch.Tensor | None = None,
                 w_row: torch.Tensor | None = None) -> torch.Tensor:
        """(G,) log Σ_b exp(α z_bj) of ``rows`` (B, G), computed as ``torch.logsumexp`` does (same values).

        With ``refined`` and ``w_row`` (B, G), also write the refined rows m·z·w_col + (1 − m)·z·w_row into
        ``refined``, the column weight w_col = exp(α z − lse_j) (lse_j over the bank and ``rows``) taken as
        exp(α z − max_j) · exp(max_j − lse_j): one exponential of the rows. The work runs in column blocks of
        ``_COLUMN_BLOCK`` so that each block's scratch stays in cache; every column is reduced on its own, so the
        blocking changes no value."""
        width = rows.shape[1]
        block = min(width, _COLUMN_BLOCK)
        scratch = self._buffer("z", (rows.shape[0], block), self._dtype(rows.device), rows.device)
        stat = torch.empty(width, dtype=scratch.dtype, device=rows.device)
        if refined is not None:
            hist = self.column_lse()
            col = self._buffer("col", (rows.shape[0], block), rows.dtype, rows.device)
            term = self._buffer("term", (rows.shape[0], block), rows.dtype, rows.device)
        for first in range(0, width, block):
            last = min(first + block, width)
            z = scratch[:, :last - first]
            z.copy_(rows[:, first:last]).mul_(self.alpha)
            top = z.amax(dim=0, keepdim=True)
            top.masked_fill_(top.abs() == float("inf"), 0.0)
            z.sub_(top).exp_()
            part = torch.sum(z, dim=0, out=stat[first:last]).log_().add_(top[0])
            if refined is None:
                continue
            lse = part if hist is None else torch.logaddexp(hist[first:last].to(part.device), part)
            top.sub_(lse).exp_()  # exp(max_j − lse_j) <= 1
            w_col = col[:, :last - first].copy_(z.mul_(top))  # in the statistics' dtype, rounded once
            current, out = rows[:, first:last], refined[:, first:last]
            torch.mul(current, self.m, out=out).mul_(w_col)  # the graph's product order: (m·z)·w_col
            torch.mul(current, 1.0 - self.m, out=term[:, :last - first]).mul_(w_row[:, first:last])
            out.add_(term[:, :last - first])
        return stat

    def _push(self, rows: torch.Tensor) -> None:
        last, self._last = self._last, None
        if last is not None and _same_rows(last[0], rows) and last[1] == rows._version:
            stat = last[2]
        else:
            with torch.no_grad():
                stat = self._columns(rows)
        self._back.append(stat)
        self._back_agg = stat if self._back_agg is None else torch.logaddexp(self._back_agg, stat)

    def _pop_oldest(self) -> None:
        if not self._front:
            agg = None
            for stat in reversed(self._back):
                agg = stat if agg is None else torch.logaddexp(stat, agg)
                self._front.append(agg)
            self._back, self._back_agg = [], None
        self._front.pop()

    def column_lse(self) -> torch.Tensor | None:
        """(G,) log Σ_r exp(α z_rj) over the stored rows, or None when the bank is empty."""
        front = self._front[-1] if self._front else None
        if front is None:
            return self._back_agg
        return front if self._back_agg is None else torch.logaddexp(front, self._back_agg)

    def _refine(self, current: torch.Tensor) -> torch.Tensor:
        if not (torch.is_grad_enabled() and current.requires_grad):
            return self._refine_no_grad(current)
        z = self.alpha * current.to(self._dtype(current.device))
        lse = torch.logsumexp(z, dim=0)
        hist = self.column_lse()
        if hist is not None:
            lse = torch.logaddexp(hist.to(lse.device), lse)
        w_col = torch.exp(z - lse).to(current.dtype)
        w_row = torch.softmax(self.beta * current, dim=1)
        return self.m * current * w_col + (1.0 - self.m) * current * w_row

    @torch.no_grad()
    def _refine_no_grad(self, current: torch.Tensor) -> torch.Tensor:
        """The refine above without autograd and with fewer passes over (B, G) (:meth:`_columns`); the float32
        terms are multiplied in the graph's order. Equal to it up to the float64 rounding of the column weight's
        factorisation."""
        shape, dtype, device = tuple(current.shape), current.dtype, current.device
        scaled, w_row = self._buffer("scaled", shape, dtype, device), self._buffer("w_row", shape, dtype, device)
        torch.ops.aten._softmax.out(torch.mul(current, self.beta, out=scaled), 1, False, out=w_row)
        refined = torch.empty_like(current)  # a fresh tensor: the caller keeps it
        stat = self._columns(current, refined, w_row)
        self._last = (current, current._version, stat)
        return refined

    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (*self._back, *self._front))


def _same_rows(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether ``a`` and ``b`` view the same memory the same way (``b`` may be ``a.detach()``)."""
    return (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
            and a.dtype == b.dtype and a.device == b.device)


def make_bank(implementation: str = "incremental", **kwargs) -> HSMBank:
    if implementation == "direct":
        return DirectBank(**kwargs)
    if implementation == "incremental":
        return IncrementalBank(**kwargs)
    raise ValueError(f"unknown HSM implementation {implementation!r}; choose one of {IMPLEMENTATIONS}")


class HubnessSuppressionMemory:
    """The HSM as HAT-VTR uses it: hubness-aware target selection and posterior reranking (Sec. 4.2, Uses 1-2).

    Args:
        cfg: :class:`HSMConfig`.
        track_k: keep the bank's k-occurrence counts (for HAT-VTR's hubness hooks, App. F); 0 = off.
    """

    def __init__(self, cfg: HSMConfig, track_k: int = 0):
        self.cfg = cfg
        self.track_k = track_k
        self.bank: HSMBank | None = None
        self.neg_entries = 0
        self.scored_entries = 0

    @property
    def active(self) -> bool:
        return self.cfg.enabled_select or self.cfg.enabled_refine or self.track_k > 0

    def reset(self) -> None:
        if self.bank is not None:
            self.bank.reset()
        self.neg_entries = self.scored_entries = 0

    def _ensure_bank(self, sims: torch.Tensor) -> HSMBank:
        if self.bank is None:
            capacity = self.cfg.bank_capacity(sims.shape[1])
            if capacity == 0:
                log.warning("HSM bank capacity is 0 (capacity 1 including the current batch): nothing is refined")
            self.bank = make_bank(self.cfg.implementation, alpha=self.cfg.alpha, beta=self.cfg.beta, m=self.cfg.m,
                                  capacity=capacity, device="cpu" if self.cfg.device == "cpu" else sims.device,
                                  track_k=self.track_k)
        return self.bank

    def _use_operator(self) -> bool:
        return (self.bank is not None and len(self.bank) > 0) or self.cfg.refine_first_batch

    def refine_current(self, sims: torch.Tensor) -> torch.Tensor:
        """H([bank; sims]) current rows, or H(sims) alone when the bank is empty (differentiable)."""
        return self._ensure_bank(sims).refine(sims)

    @torch.no_grad()
    def select(self, sims: torch.Tensor) -> torch.Tensor:
        """(B,) target indices: argmax of the refined current rows (Use 1); argmax of ``sims`` on warm-up."""
        if not self.cfg.enabled_select or not self._use_operator():
            return sims.argmax(dim=1)
        return self.refine_current(sims).argmax(dim=1)

    @torch.no_grad()
    def rerank(self, sims: torch.Tensor) -> torch.Tensor:
        """Posterior reranking (Use 2) of the scored rows, then append the raw rows to the bank."""
        self.neg_entries += torch.count_nonzero(sims < 0)  # on the device (a bool sum would widen to int64 first)
        self.scored_entries += sims.numel()
        if not self.active:
            return sims
        out = self.refine_current(sims) if self.cfg.enabled_refine and self._use_operator() else sims
        self._ensure_bank(sims).append(sims)
        return out

    @property
    def negative_share(self) -> float:
        if not self.scored_entries:
            return float("nan")
        return ratio(self.neg_entries, self.scored_entries)

    def bank_stats(self) -> dict[str, float]:
        if self.bank is None:
            return {"hsm_bank_blocks": 0, "hsm_bank_rows": 0, "hsm_bank_bytes": 0}
        return {"hsm_bank_blocks": len(self.bank), "hsm_bank_rows": self.bank.num_rows,
                "hsm_bank_bytes": self.bank.nbytes()}
