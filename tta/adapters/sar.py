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
loss or gradient in either pass skips the update with θ restored; step 6 is :meth:`SARAdapter.after_step`.

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
    def reliable(self, entropies: torch.Tensor, thr: float) -> torch.Tensor:
        """(n,) indices of S1 = {E < E0} (``quantile``: {E ≤ thr})."""
        return (entropies <= thr if self.margin == "quantile" else entropies < thr).nonzero().flatten()

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor | None:
        """Step 1: L1 = mean_{S1} E_i over the first-pass forward (None = empty S1, no update)."""
        entropies = softmax_entropy(self.logits(fw.sims))
        b = entropies.numel()
        thr = self.threshold(entropies)
        s1 = self.reliable(entropies, thr)
        self._first = (thr, s1, b)
        self.note("sar/s1", int(s1.numel()), of=b)
        if s1.numel() == 0 and self.empty_set == "zero":
            self.note("sar/s2", 0, of=b)
            return None
        return entropies[s1].mean()

    def second_pass(self, batch: dict, step: int) -> torch.Tensor | None:
        """Steps 2-4: SAM ascent, L2 = mean_{S2} E'_i at θ + ε̂, the EMA (None = empty S2, θ restored)."""
        thr, s1, b = self._first
        self.optimizer.first_step(zero_grad=True)
        logits2 = self.logits(self.forward_queries(batch).sims)[s1]
        ent2 = softmax_entropy(logits2) if self.second_entropy == "sum" else elementwise_entropy(logits2)
        keep = ent2 < thr
        n2 = int(keep.any(dim=-1).sum()) if ent2.dim() == 2 else int(keep.sum())  # 0 iff nothing is kept
        self.note("sar/s2", n2, of=b)
        if n2 == 0 and self.empty_set == "zero":
            return None
        loss2 = ent2[keep].mean()
        value = loss2.item()  # the EMA its recovery compares with a threshold on the host
        if not math.isnan(value):
            self.ema = value if self.ema is None else self.ema_momentum * self.ema + (1 - self.ema_momentum) * value
        return loss2

    def abandon_update(self) -> None:
        """A skipped step: θ back from θ + ε̂ exactly (no-op before the ascent)."""
        if isinstance(self.optimizer, SAM):
            self.optimizer.restore()

    def after_step(self, step: int) -> None:
        self.maybe_recover()

    def maybe_recover(self) -> None:
        """Step 6: reset to the initial state when the loss EMA falls below ``reset_threshold``."""
        recovered = self.recovery and self.ema is not None and self.ema < self.reset_threshold
        if recovered:
            ema = self.ema
            self.restore_initial()
            if not self.clear_ema_on_reset:
                self.ema = ema  # the original writes the pre-reset EMA back after reset()
        self.note("sar/recoveries", int(recovered))
        if self.ema is not None:
            self.counters["sar/ema"] = self.ema

    def restore_initial(self) -> None:
        """The model and optimiser back to their initial state (the reset snapshot), EMA cleared; unlike
        :meth:`reset` (a shift boundary) it leaves a post-hoc refiner's bank alone."""
        self.restore_snapshot()
        self.reset_state()
