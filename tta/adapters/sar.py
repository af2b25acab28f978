"""``adapter=sar``: SAR (Niu et al., ICLR 2023) as retrieval TTA (spec/baselines.md §5).

One step (entropies over the gallery at τ = 0.02, E0 = 0.4·ln C with C = G):

1. forward, S1 = {i : E_i < E0}, L1 = mean_{S1} E_i, backward (reliable entropy, Eq. 2);
2. SAM ascent (:mod:`tta.adapters.sam`): ε̂ = ρ g/‖g‖₂ over all adapted tensors, ρ = 0.05, θ <- θ + ε̂;
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
original's mean over an empty set.

Parameters: the original adapts every norm affine except the top of the network (ResNet ``layer4``; ViT blocks
9-11 and the final norm); the retrieval default adapts all query-encoder LayerNorms (protocol), and
``exclude_top_blocks: true`` drops the LayerNorms of blocks ``top_blocks`` (9, 10, 11) and the post/final one.
The original uses SGD (lr 2.5e-4 ×(b/64), momentum 0.9) inside SAM; here AdamW lr 3e-5, weight decay 1e-4.

Presets: ``orig`` (default) as above with ``margin: abs_lnC``. ``vtr_tta`` (``bingqingzhang/vtr_tta``
``tta_model/sar.py``, baselines.md §8): a quantile margin (k = ⌊0.4·b⌋, here ≥ 1; thr = the k-th smallest
entropy, S1 = {E ≤ thr}, S2 = {E' < thr}); the second-pass entropy is not summed over the gallery, so the filter
and the mean act on the individual −p ln p terms (``second_entropy: elementwise``); recovery off; the legacy
shared forward. TCR's SAR is the quantile margin with summed entropies (``margin: quantile``).

Counters: ``sar/s1``, ``sar/s2`` (selected queries; with ``second_entropy: elementwise`` a query counts in S2
when at least one of its terms is kept), their ``*_rate`` (|S|/b over all steps), ``sar/recoveries``, the last
``sar/ema``; per step in history.
"""

from __future__ import annotations

import copy
import logging
import math
import re

import torch
from torch import nn

from tta.adapters.base import BatchRecord
from tta.adapters.entropy import (
    GalleryEntropyAdapter,
    check_choice,
    elementwise_entropy,
    entropy_margin,
    resolve_preset,
    softmax_entropy,
)
from tta.adapters.sam import SAM

log = logging.getLogger(__name__)

MARGINS = ("abs_lnC", "quantile")
EMPTY_SETS = ("zero", "nan")
SECOND_ENTROPY = ("sum", "elementwise")
_BLOCK = re.compile(r"(?:^|\.)(?:resblocks|layers?|blocks|h)\.(\d+)\.")
_FINAL_NORMS = ("ln_post", "ln_final", "norm", "final_layer_norm", "post_layernorm", "final_layernorm")


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
        **kwargs: :class:`~tta.adapters.entropy.GalleryEntropyAdapter` options.
    """

    PRESET_TABLE = {
        "orig": {"margin": "abs_lnC", "recovery": True, "second_entropy": "sum"},
        "vtr_tta": {"margin": "quantile", "recovery": False, "second_entropy": "elementwise"},
    }

    selected_key = "sar/s2"  # logged as the selected-sample fraction

    def __init__(self, margin: str | None = None, margin_scale: float = 0.4, quantile: float = 0.4,
                 rho: float = 0.05, reset_threshold: float = 0.2, ema_momentum: float = 0.9,
                 recovery: bool | None = None, clear_ema_on_reset: bool = False, empty_set: str = "zero",
                 second_entropy: str | None = None, exclude_top_blocks: bool = False,
                 top_blocks: tuple[int, ...] = (9, 10, 11), lr: float | dict = 3e-5, **kwargs):
        super().__init__(lr=lr, **kwargs)
        opts = resolve_preset(self.PRESET_TABLE, self.preset, margin=margin, recovery=recovery,
                              second_entropy=second_entropy)
        self.margin = check_choice("margin", opts["margin"], MARGINS)
        self.recovery = bool(opts["recovery"])
        self.second_entropy = check_choice("second_entropy", opts["second_entropy"], SECOND_ENTROPY)
        self.empty_set = check_choice("empty_set", empty_set, EMPTY_SETS)
        self.margin_scale, self.quantile, self.rho = float(margin_scale), float(quantile), float(rho)
        self.reset_threshold, self.ema_momentum = float(reset_threshold), float(ema_momentum)
        self.clear_ema_on_reset = bool(clear_ema_on_reset)
        self.exclude_top_blocks, self.top_blocks = bool(exclude_top_blocks), tuple(int(b) for b in top_blocks)
        self.ema: float | None = None

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
    def threshold(self, entropies: torch.Tensor) -> float:
        if self.margin == "abs_lnC":
            return entropy_margin(self.margin_scale, self.gallery.shape[0])
        k = max(1, int(self.quantile * entropies.numel()))
        return float(entropies.detach().sort().values[k - 1])

    def adapt_batch(self, batch: dict, record: BatchRecord) -> torch.Tensor:
        """``steps`` two-pass SAM steps (SAM needs a second forward inside each step, so SAR runs its own loop);
        returns the (b, G) scores of the last first-pass forward (pre-update) or a post-update forward."""
        if not self.steps or self.optimizer is None:
            return super().adapt_batch(batch, record)
        sims = None
        with torch.enable_grad():
            for _ in range(self.steps):
                sims = self.sar_step(batch, record)
                self.maybe_recover()
        if self.predict_with == "post_update":
            with torch.no_grad():
                sims = self.forward_queries(batch).sims
        return sims

    def sar_step(self, batch: dict, record: BatchRecord) -> torch.Tensor:
        """One step (module docstring, items 1-5); returns the detached first-pass scores."""
        opt: SAM = self.optimizer
        opt.zero_grad(set_to_none=True)
        fw = self.forward_queries(batch)
        entropies = softmax_entropy(self.logits(fw.sims))
        b = entropies.numel()
        thr = self.threshold(entropies)
        s1 = (entropies <= thr if self.margin == "quantile" else entropies < thr).nonzero().flatten()
        self.note("sar/s1", int(s1.numel()), of=b)
        if s1.numel() == 0 and self.empty_set == "zero":
            self.note("sar/s2", 0, of=b)
            record.skipped_updates += 1
            return fw.sims.detach()
        loss1 = entropies[s1].mean()
        loss1.backward()
        opt.first_step(zero_grad=True)
        fw2 = self.forward_queries(batch)
        logits2 = self.logits(fw2.sims)[s1]
        ent2 = softmax_entropy(logits2) if self.second_entropy == "sum" else elementwise_entropy(logits2)
        keep = ent2 < thr
        n2 = int(keep.any(dim=-1).sum()) if ent2.dim() == 2 else int(keep.sum())
        self.note("sar/s2", n2, of=b)
        if not keep.any() and self.empty_set == "zero":
            opt.restore()
            opt.zero_grad(set_to_none=True)
            record.skipped_updates += 1
            return fw.sims.detach()
        loss2 = ent2[keep].mean()
        if not math.isnan(loss2.item()):
            value = float(loss2.item())
            self.ema = value if self.ema is None else self.ema_momentum * self.ema + (1 - self.ema_momentum) * value
        loss2.backward()
        if not torch.isfinite(loss2):
            self.counters["nonfinite_losses"] += 1
        opt.second_step(zero_grad=True)
        self.counters["updates"] += 1
        record.losses.append(float(loss2.detach()))
        return fw.sims.detach()

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
        with torch.no_grad():
            for p, saved in zip(self.params_to_adapt(), self._snapshot["params"], strict=True):
                p.copy_(saved)
        self.optimizer.load_state_dict(copy.deepcopy(self._snapshot["optim"]))
        self.reset_state()
