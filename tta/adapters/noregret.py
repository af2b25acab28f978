"""``adapter=noregret``: HAT-VTR's updates, kept and scored only while they beat the HSM-refined source model.

Two score paths run side by side on every batch: the *adapted* path (HAT-VTR's LayerNorm updates, its HSM bank)
and the *reference* path (the source LayerNorms, one extra no-grad forward, its own HSM bank: ``adapter=hsm``).
Skewness depends on the number of rows, and a rollback empties the adapted bank but keeps the reference bank, so
the guard compares the two banks over the same window: the newest blocks both hold (the queries since the last
rollback, up to the bank's capacity), where they hold the raw rows of the same queries:

* **gain** = skew(reference window) − skew(adapted window), the k-occurrence skewness (the hubness measure of
  HAT-VTR Sec. 3) the adaptation removed;
* **agreement**: share of the batch whose refined top-1 is the same on both paths (its EMA measures drift).

The adapted scores are returned only when ``gain >= guard.margin`` (after ``guard.warmup`` batches of a shift);
otherwise the reference (HSM-only) scores are. When the adaptation drifts (agreement EMA below ``guard.agreement``)
without removing hubness, it is rolled back: source LayerNorms, fresh optimizer, empty adapted bank and memory.
The ``guard.max_rollbacks``-th rollback of a shift turns the adaptation off until the next reset; a batch then
costs what ``adapter=hsm`` costs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import torch

from tta.adapters.base import BatchRecord
from tta.adapters.components.hsm import HubnessSuppressionMemory
from tta.adapters.components.options import build_options
from tta.adapters.hatvtr import HATVTRAdapter
from tta.metrics.hubness import occurrence_skewness
from tta.utils.bounds import NON_NEGATIVE, UNIT, Int, Options, Real, bound


@dataclass
class GuardConfig(Options):
    """When the adapted scores are used, and when the adaptation is rolled back (module docstring)."""

    block: ClassVar[str] = "guard"
    k: int = bound(Int(1), 10)
    warmup: int = bound(Int(1), 3)
    margin: float = bound(NON_NEGATIVE, 0.0)
    agreement: float = bound(UNIT, 0.8)
    ema: float = bound(Real(0, 1, lo_open=True), 0.3)
    max_rollbacks: int = bound(Int(1), 2)


class NoRegretAdapter(HATVTRAdapter):
    """HAT-VTR guarded by an HSM-only reference path.

    Args:
        guard: :class:`GuardConfig` options (``k``, ``warmup``, ``margin``, ``agreement``, ``ema``, ``max_rollbacks``).
        the rest: see :class:`~tta.adapters.hatvtr.HATVTRAdapter`.
    """

    # the reference bank and the guard's running state; the adapted bank and memory come from HAT-VTR
    state_keys = ("ref", "agree_ema", "seen", "rollbacks", "frozen", "use_adapted")
    option_types = (GuardConfig,)

    def __init__(self, guard: dict | None = None, **kwargs):
        super().__init__(**kwargs)
        self.guard = build_options(GuardConfig, guard)
        k = max(self.hsm.track_k, self.guard.k)
        self.hsm = HubnessSuppressionMemory(self.hsm_cfg, track_k=k)
        self.ref = HubnessSuppressionMemory(self.hsm_cfg, track_k=self.guard.k)
        self.agree_ema: float | None = None
        self.seen = 0  # batches since the last reset or rollback
        self.rollbacks = 0
        self.frozen = False
        self.use_adapted = False
        self._ref_raw: torch.Tensor | None = None
        self.counters.update({"rollbacks": 0, "adapted_batches": 0})

    # ------------------------------------------------------------------------------------------------ hooks
    def reset_state(self) -> None:
        super().reset_state()
        self.ref.reset()
        self.agree_ema, self.seen, self.rollbacks, self.frozen, self.use_adapted = None, 0, 0, False, False

    def adapt_batch(self, batch: dict, record: BatchRecord) -> torch.Tensor:
        self._ref_raw = self.source_sims(batch)
        if self.frozen:
            return self._ref_raw
        return super().adapt_batch(batch, record)

    @torch.no_grad()
    def source_sims(self, batch: dict) -> torch.Tensor:
        """(B, G) similarities of the source model: the adapted LayerNorms swapped out for one forward."""
        params = self.params_to_adapt()
        if self.frozen or self._snapshot is None or not params:
            return self.forward_queries(batch).sims.float()
        adapted = [p.detach().clone() for p in params]
        for p, saved in zip(params, self._snapshot["params"], strict=True):
            p.copy_(saved)
        try:
            return self.forward_queries(batch).sims.float()
        finally:
            for p, value in zip(params, adapted, strict=True):
                p.copy_(value)

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        ref = self.ref.rerank(self._ref_raw.to(sims.device))
        self._ref_raw = None
        if self.frozen:
            return ref
        adapted = super().refine_scores(sims)
        self.seen += 1
        agreement = (adapted.argmax(dim=1) == ref.argmax(dim=1)).float().mean()
        gain = self.hubness_gain().to(agreement.device)  # a bank kept on the CPU by its option: a CPU value
        agree, gain = torch.stack([agreement.double(), gain]).tolist()  # the guard's one read of a batch
        self.agree_ema = agree if self.agree_ema is None else (1 - self.guard.ema) * self.agree_ema + self.guard.ema * agree
        ready = self.seen >= self.guard.warmup
        self.use_adapted = ready and gain >= self.guard.margin
        if self.record is not None:
            self.record.extras.update({"agreement": agree, "hub_gain": gain, "adapted": self.use_adapted})
        if ready and not self.use_adapted and self.agree_ema < self.guard.agreement:
            self.roll_back()
        if self.use_adapted:
            self.counters["adapted_batches"] += 1
            return adapted
        return ref

    # ------------------------------------------------------------------------------------------------ guard
    def hubness_gain(self) -> torch.Tensor:
        """Skewness of the reference bank's k-occurrence minus the adapted bank's, both over the newest blocks both
        banks hold (the same queries, as many rows on each side); NaN counts as 0. A float64 device value."""
        blocks = min(_blocks(self.ref), _blocks(self.hsm))
        return _window_skewness(self.ref, blocks, self.gallery) - _window_skewness(self.hsm, blocks, self.gallery)

    def roll_back(self) -> None:
        """Back to the source LayerNorms and a fresh optimizer, adapted bank and memory; the reference bank stays."""
        self.restore_snapshot()
        self.hsm.reset()
        if self.rm is not None:
            self.rm.reset()
        self._rm_targets = None
        self.agree_ema, self.seen = None, 0
        self.rollbacks += 1
        self.counters["rollbacks"] += 1
        self.frozen = self.rollbacks >= self.guard.max_rollbacks
        if self.record is not None:
            self.record.extras["rollback"] = True

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        super().on_batch_start(batch, record)
        record.extras["frozen"] = self.frozen

    def on_batch_end(self, record: BatchRecord) -> None:
        super().on_batch_end(record)
        self.counters["frozen"] = int(self.frozen)


def _blocks(memory: HubnessSuppressionMemory) -> int:
    return 0 if memory.bank is None else len(memory.bank)


def _window_skewness(memory: HubnessSuppressionMemory, blocks: int, like: torch.Tensor) -> torch.Tensor:
    """The k-occurrence skewness of the bank's newest ``blocks`` blocks on their device (0 for none, or NaN); ``like``
    gives the device of a zero."""
    window = None if memory.bank is None else memory.bank.recent_occurrence(blocks)
    if window is None or window[1] == 0:
        return like.new_zeros((), dtype=torch.float64)
    occ, rows = window
    skew = occurrence_skewness(occ, min(memory.bank.track_k, occ.numel()), rows)
    return torch.where(skew.isnan(), 0.0, skew)
