"""``adapter=sar``: SAR (Niu et al., ICLR 2023) as retrieval TTA (defaults and deviations: docs/methods/sar.md).

One step (entropies over the gallery at τ = 0.02, E0 = 0.4·ln C with C = G):

1. forward, S1 = {i : E_i < E0}, L1 = mean_{S1} E_i, backward (reliable entropy, Eq. 2);
2. SAM ascent (:mod:`tta.adapters.components.sam`): ε̂ = ρ g/‖g‖₂ over all adapted tensors, ρ = 0.05, θ <- θ + ε̂;
3. forward at θ + ε̂, S2 = {i ∈ S1 : E'_i < E0}, L2 = mean_{S2} E'_i;
4. if L2 is not NaN: ema <- L2 on the first step, else ema <- 0.9·ema + 0.1·L2;
5. backward L2, restore θ, base (AdamW) step with the gradient from θ + ε̂;
6. recovery: if ema < 0.2, reset the model and optimiser to their initial state. As in the original code the
   threshold is hard-wired to 0.2 (exposed here as ``reset_threshold``), and ``reset()`` clears the EMA but the
   caller writes the pre-reset value back, so once below 0.2 the model is reset at every following step until
   the EMA rises again (default as the code; ``clear_ema_on_reset: true`` keeps it cleared).

The 0.2-nat threshold is not scale-free: at τ = 0.02 and G = 1000 confident retrievals fall below it and can
trigger frequent resets; resets are counted (``sar/recoveries``, per step in history) and the threshold exposed.

Edge cases: an empty S1 makes the original's loss NaN, which then poisons the SAM step; the default
(``empty_set: zero``, as TCR's guard) treats an empty S1 or S2 as a zero loss without gradient — no ascent, no
step (θ restored exactly if already perturbed) and no EMA update (the original skips NaN too); ``nan`` keeps the
original's mean over an empty set, whose NaN the base's non-finite guard then skips (``nonfinite_losses``).

Parameters: the original adapts every norm affine except the top of the network (ResNet ``layer4``; ViT blocks
9-11 and the final norm); the retrieval default adapts all query-encoder LayerNorms (protocol), and
``exclude_top_blocks: true`` drops the LayerNorms of blocks ``top_blocks`` (9, 10, 11) and the post/final one.
The original uses SGD (lr 2.5e-4 ×(b/64), momentum 0.9) inside SAM; here AdamW lr 3e-5, weight decay 1e-4.

Presets: ``orig`` (default) as above with ``margin: abs_lnC``. ``vtr_tta`` (``bingqingzhang/vtr_tta``
``tta_model/sar.py``): a quantile margin (k = ⌊0.4·b⌋, here ≥ 1; thr = the k-th smallest
entropy, S1 = {E ≤ thr}, S2 = {E' < thr}); the second-pass entropy is not summed over the gallery, so the filter
and the mean act on the individual −p ln p terms (``second_entropy: elementwise``); recovery off; the legacy
shared forward. TCR's SAR is the quantile margin with summed entropies (``margin: quantile``).

Steps 1-5 run in the base's update loop (``two_pass``: :meth:`SARAdapter.adapt_loss` is step 1,
:meth:`SARAdapter.second_pass` steps 2-4, the optimizer's ``step`` step 5) under its non-finite guard: a non-finite
loss or gradient in either pass skips the update with θ restored; step 6 is :meth:`SARAdapter.after_step`. S1 and
S2 are masks and the EMA a device value, so on a GPU an update reads nothing back: the base decides the skip there,
the second pass runs after every first pass with its ascent, S2 and EMA gated by the first's answer, and a recovery
restores the snapshot element by element where the EMA says so (docs/methods/sar.md, "On the device").

Counters: ``sar/s1``, ``sar/s2`` (selected queries; with ``second_entropy: elementwise`` a query counts in S2
when at least one of its terms is kept), their ``*_rate`` (|S|/b over all steps), ``sar/recoveries``, the last
``sar/ema``; per step in history.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass

import torch
from torch import nn

from tta.adapters.base import QueryForward
from tta.adapters.components.entropy import GalleryEntropyAdapter, elementwise_entropy, softmax_entropy
from tta.adapters.components.options import build_options, check_choice
from tta.adapters.components.sam import SAM
from tta.utils.bounds import NON_NEGATIVE, POSITIVE, UNIT, Int, Options, Real, bound

log = logging.getLogger(__name__)

MARGINS = ("abs_lnC", "quantile")
EMPTY_SETS = ("zero", "nan")
SECOND_ENTROPY = ("sum", "elementwise")
_BLOCK = re.compile(r"(?:^|\.)(?:resblocks|layers?|blocks|h)\.(\d+)\.")
_FINAL_NORMS = ("ln_post", "ln_final", "norm", "final_layer_norm", "post_layernorm", "final_layernorm")


@dataclass
class SAROptions(Options):
    """SAR's options (None = the preset's value; :class:`SARAdapter` documents each)."""

    margin: str | None = None
    margin_scale: float = bound(POSITIVE, 0.4)
    quantile: float = bound(Real(0, 1, lo_open=True), 0.4)
    rho: float = bound(POSITIVE, 0.05)
    reset_threshold: float = bound(NON_NEGATIVE, 0.2)
    ema_momentum: float = bound(UNIT, 0.9)
    recovery: bool | None = None
    clear_ema_on_reset: bool = False
    empty_set: str = "zero"
    second_entropy: str | None = None
    exclude_top_blocks: bool = False
    top_blocks: tuple[int, ...] = bound(Int(0), (9, 10, 11))

    def __post_init__(self):
        super().__post_init__()
        check_choice("margin", self.margin, MARGINS)
        check_choice("second_entropy", self.second_entropy, SECOND_ENTROPY)
        check_choice("empty_set", self.empty_set, EMPTY_SETS)
        self.recovery, self.clear_ema_on_reset = bool(self.recovery), bool(self.clear_ema_on_reset)
        self.exclude_top_blocks, self.top_blocks = bool(self.exclude_top_blocks), tuple(int(b) for b in self.top_blocks)
        for name in ("margin_scale", "quantile", "rho", "reset_threshold", "ema_momentum"):
            setattr(self, name, float(getattr(self, name)))


SAR_PRESETS = {
    "orig": {"margin": "abs_lnC", "recovery": True, "second_entropy": "sum"},
    "vtr_tta": {"margin": "quantile", "recovery": False, "second_entropy": "elementwise"},
}


class SARAdapter(GalleryEntropyAdapter):
    """Sharpness-aware reliable entropy minimisation with model recovery (module docstring).

    Args:
        margin: ``abs_lnC`` | ``quantile`` (None = preset).
        margin_scale: the 0.4 of E0 = 0.4·ln C (SAR ``main.py``).
        quantile: share of the batch for ``margin: quantile`` (vtr_tta and TCR: 0.4).
        rho: SAM radius ρ.
        reset_threshold: the 0.2 of ``ema < 0.2`` (SAR ``sar.py``, hard-coded there).
        ema_momentum: the 0.9 of ema <- 0.9·ema + 0.1·L2.
        recovery: model recovery on/off (None = preset: ``vtr_tta`` off).
        clear_ema_on_reset: false = the code's quirk (pre-reset EMA written back).
        empty_set: ``zero`` | ``nan`` (see the module docstring).
        second_entropy: ``sum`` | ``elementwise`` (None = preset).
        exclude_top_blocks: drop the LayerNorms of ``top_blocks`` and the post/final LayerNorm.
        top_blocks: the block indices excluded by ``exclude_top_blocks`` (SAR's ViT rule: 9, 10, 11).
        **kwargs: :class:`~tta.adapters.components.entropy.GalleryEntropyAdapter` options.
    """

    selected_key = "sar/s2"  # logged as the selected-sample fraction
    state_keys = ("ema",)
    two_pass = True  # SAM: the base loop calls second_pass after the first backward
    option_types = (SAROptions,)

    def __init__(self, margin: str | None = None, margin_scale: float = 0.4, quantile: float = 0.4,
                 rho: float = 0.05, reset_threshold: float = 0.2, ema_momentum: float = 0.9,
                 recovery: bool | None = None, clear_ema_on_reset: bool = False, empty_set: str = "zero",
                 second_entropy: str | None = None, exclude_top_blocks: bool = False,
                 top_blocks: tuple[int, ...] = (9, 10, 11), lr: float | dict = 3e-5, **kwargs):
        super().__init__(lr=lr, **kwargs)
        o = build_options(SAROptions, dict(
            margin=margin, margin_scale=margin_scale, quantile=quantile, rho=rho, reset_threshold=reset_threshold,
            ema_momentum=ema_momentum, recovery=recovery, clear_ema_on_reset=clear_ema_on_reset, empty_set=empty_set,
            second_entropy=second_entropy, exclude_top_blocks=exclude_top_blocks, top_blocks=top_blocks),
            presets=SAR_PRESETS, preset=self.preset)
        self.margin, self.recovery, self.second_entropy = o.margin, o.recovery, o.second_entropy
        self.empty_set, self.margin_scale, self.quantile, self.rho = o.empty_set, o.margin_scale, o.quantile, o.rho
        self.reset_threshold, self.ema_momentum = o.reset_threshold, o.ema_momentum
        self.clear_ema_on_reset = o.clear_ema_on_reset
        self.exclude_top_blocks, self.top_blocks = o.exclude_top_blocks, o.top_blocks
        self.ema: float | None = None
        self._first: tuple[float, torch.Tensor, int] | None = None  # (E0, S1, b) of the current step's first pass

    # ---------------------------------------------------------------------------------------- params
    def params_to_adapt(self) -> list[nn.Parameter]:
        if not self.exclude_top_blocks:
            return self.query_layernorm_params()
        params = []
        for name, ln in self.model.layer_norms(self.query_side):
            block = _BLOCK.search(name)
            if (block and int(block.group(1)) in self.top_blocks) or name.split(".")[-1] in _FINAL_NORMS:
                continue
            params += [p for p in (ln.weight, ln.bias) if p is not None]
        return params

    def build_optimizer(self, params: list[nn.Parameter]) -> SAM:
        return SAM(super().build_optimizer(params), rho=self.rho)

    def reset_state(self) -> None:
        self.ema = None

    # ------------------------------------------------------------------------------------------ step
    def reliable(self, entropies: torch.Tensor, thr: float | torch.Tensor) -> torch.Tensor:
        """(b,) mask of S1 = {E < E0} (``quantile``: {E ≤ thr})."""
        return entropies <= thr if self.margin == "quantile" else entropies < thr

    def masked_mean(self, values: torch.Tensor, keep: torch.Tensor) -> torch.Tensor:
        """mean_{keep} values without reading the selection's size back: 0 for an empty selection under
        ``empty_set: zero`` (with :meth:`update_only_if` its update is skipped), NaN under ``nan`` (the original's)."""
        n = keep.sum()
        return torch.where(keep, values, 0.0).sum() / (n.clamp(min=1) if self.empty_set == "zero" else n)

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor:
        """Step 1: L1 = mean_{S1} E_i over the first-pass forward (no update for an empty S1, ``empty_set: zero``)."""
        entropies = softmax_entropy(self.logits(fw.sims))
        b = entropies.numel()
        thr = self.threshold(entropies, on_device=True)
        s1 = self.reliable(entropies.detach(), thr)
        self._first, self._n2 = (thr, s1, b), 0
        n1 = s1.sum()
        self.note("sar/s1", n1, of=b)
        if self.empty_set == "zero":
            self.update_only_if(n1 > 0)
        return self.masked_mean(entropies, s1)

    def second_pass(self, batch: dict, step: int) -> torch.Tensor:
        """Steps 2-4: SAM ascent, L2 = mean_{S2} E'_i at θ + ε̂, the EMA (no update for an empty S2). Where the
        skip is decided on the device this runs after every first pass: S2's count and the EMA then change only if
        the first pass updates (:attr:`first_pass_done`); θ + ε̂ is transient (the step restores θ exactly)."""
        thr, s1, b = self._first
        ok = True if self.first_pass_done is None else self.first_pass_done  # None: called outside an update
        self.optimizer.first_step(zero_grad=True)
        logits2 = self.logits(self.forward_queries(batch).sims)
        if self.second_entropy == "sum":
            ent2 = softmax_entropy(logits2)
            keep = s1 & (ent2.detach() < thr)
            kept_queries = keep
        else:  # the terms of S1's rows
            ent2 = elementwise_entropy(logits2)
            keep = s1.unsqueeze(1) & (ent2.detach() < thr)
            kept_queries = keep.any(dim=1)
        n2 = kept_queries.sum()
        self._n2 = n2 if ok is True else torch.where(ok, n2, 0)
        if self.empty_set == "zero":
            self.update_only_if(n2 > 0)
        loss2 = self.masked_mean(ent2, keep)
        self.update_ema(loss2.detach(), valid=(n2 > 0) & ~loss2.isnan() & ok)
        return loss2

    def update_ema(self, loss2: torch.Tensor, valid: torch.Tensor) -> None:
        """Where ``valid``: ema <- L2 on the first such step, else m·ema + (1 − m)·L2, in float64 on the device
        (NaN = none yet; the operations of the original's Python float arithmetic, in its order)."""
        ema = self.ema
        if ema is None:
            ema = loss2.new_full((), math.nan, dtype=torch.float64)
        elif not torch.is_tensor(ema) or ema.device != loss2.device:  # a number, or a checkpoint's CPU tensor
            ema = torch.as_tensor(ema, dtype=torch.float64).to(loss2.device)
        value = loss2.double()
        blended = torch.where(ema.isnan(), value, self.ema_momentum * ema + (1 - self.ema_momentum) * value)
        self.ema = torch.where(valid, blended, ema)

    def abandon_update(self) -> None:
        """A skipped step: θ back from θ + ε̂ exactly (no-op before the ascent)."""
        if isinstance(self.optimizer, SAM):
            self.optimizer.restore()

    def after_step(self, step: int) -> None:
        self.note("sar/s2", self._n2, of=self._first[2])
        self.maybe_recover()

    def maybe_recover(self) -> None:
        """Step 6: reset to the initial state when the loss EMA falls below ``reset_threshold`` (decided on the
        device where the skip is: :meth:`~tta.adapters.base.OnlineAdapter.restore_snapshot`)."""
        if not self.recovery or self.ema is None:
            self.note("sar/recoveries", 0)
        else:
            recovered = self.ema < self.reset_threshold  # False for a NaN (no EMA yet)
            self.restore_snapshot(only_if=recovered)  # the original writes the pre-reset EMA back after reset()
            if self.clear_ema_on_reset:
                self.ema = torch.where(recovered, math.nan, self.ema)
            self.note("sar/recoveries", recovered.long())
        if self.ema is not None:
            self.counters["sar/ema"] = self.ema

    def settle_history(self) -> None:
        super().settle_history()
        if isinstance(self.counters.get("sar/ema"), float) and math.isnan(self.counters["sar/ema"]):
            del self.counters["sar/ema"]  # no EMA at the end (cleared, or never counted): no number to report
