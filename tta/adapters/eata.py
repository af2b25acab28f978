"""``adapter=eata``: EATA (Niu et al., ICML 2022) as retrieval TTA (defaults and deviations: docs/methods/eata.md).

Per step, with E_i = H(p_i) over the gallery (C = G classes, τ = 0.02):

1. reliability, Eq. 3: S1 = {i : E_i < E0}, E0 = 0.4·ln C (``main.py`` passes 0.4·ln 1000 = 2.763; here
   0.4·ln G, applied at τ = 0.02; E0 is absolute, so it selects differently at another τ);
2. redundancy, Eq. 5 (once the running mean m exists): S2 = {i ∈ S1 : |cos(p_i, m)| < ε}, ε = 0.05 — in
   retrieval it drops queries whose retrieval distribution resembles the recent average, typically mass on hubs;
3. running mean, Eq. 4: m starts as mean_{S1} p, then m <- 0.9·m + 0.1·mean_{S2} p (unchanged when S2 is empty);
4. weights w_i = exp(E0 − E_i), detached (every selected sample has w > 1);
5. loss, Eq. 8: L = (1/|S2|) Σ_{S2} w_i E_i + β Σ_θ F_θ (θ − θ⁰)², β = 2000; no update when S2 is empty;
6. Fisher, Eq. 9: from clean samples, argmax pseudo-labels and a batch-mean cross-entropy; the squared *batch*
   gradients are summed and divided by the number of batches; θ⁰ = the parameters at that point.

Fisher source (``fisher``): ``off`` (default) is ETA — the HAT-VTR protocol has no clean source data; with
``train_split`` the Fisher comes from ``fisher_size`` = 2000 clean training-split queries of the run's dataset
(:mod:`tta.data.source_split`), pseudo-labels = argmax over that split's gallery, computed once with the source
model before the first batch. It is a function of the source weights and stays across resets.

Original vs retrieval: the original adapts BatchNorm affines with SGD (lr 2.5e-4, momentum 0.9, batch 64); here
the query-encoder LayerNorms with AdamW lr 3e-4, weight decay 1e-4, 3 steps per batch of 16 (the shared protocol).

Presets (``preset``):

* ``orig`` (default): the rules above with ``margin: abs_lnC``;
* ``vtr_tta`` (``bingqingzhang/vtr_tta`` ``tta_model/eata.py``): E0 = 0.40 absolute; an empty S1
  is replaced by the ⌈0.25·b⌉ lowest entropies and an empty S2 by the ⌈0.1·|S1|⌉ lowest of S1 (so it always
  steps; the running mean is updated with the fallback set); no Fisher; the legacy shared forward.

``margin``: ``abs_lnC`` (E0 = margin_scale·ln G), ``abs`` (E0 = margin_value) or ``quantile`` (keep the
⌊quantile·b⌋ ≥ 1 lowest-entropy queries of the batch: S1 = {E ≤ E_(k)}, and E0 = E_(k) in the weights).
Counters: ``eata/s1`` and ``eata/s2`` (selected queries; ``*_rate`` = |S|/b over all steps, per step in history).
The filters are masks and an empty S2 a condition of the update, so a step reads nothing back to the host
(docs/methods/eata.md, "On the device")."""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tta.adapters.base import QueryForward
from tta.adapters.components.entropy import GalleryEntropyAdapter, softmax_entropy
from tta.adapters.components.options import build_options, check_choice
from tta.utils.bounds import NON_NEGATIVE, POSITIVE, UNIT, Int, Options, Real, bound

log = logging.getLogger(__name__)

MARGINS = ("abs_lnC", "abs", "quantile")
FISHER_SOURCES = ("off", "train_split")
FALLBACKS = ("none", "lowest")


@dataclass
class EATAOptions(Options):
    """EATA's options (None = the preset's value; :class:`EATAAdapter` documents each)."""

    margin: str | None = None
    margin_scale: float = bound(POSITIVE, 0.4)
    margin_value: float | None = bound(Real(0, lo_open=True, null="the preset"), None)
    quantile: float = bound(Real(0, 1, lo_open=True), 0.4)
    d_margin: float = bound(NON_NEGATIVE, 0.05)
    momentum: float = bound(UNIT, 0.9)
    fisher: str | None = None
    fisher_beta: float = bound(NON_NEGATIVE, 2000.0)
    fisher_size: int = bound(Int(1), 2000)
    fisher_batch_size: int = bound(Int(1), 64)
    fallback: str | None = None

    def __post_init__(self):
        super().__post_init__()
        check_choice("margin", self.margin, MARGINS)
        if self.margin == "abs" and self.margin_value is None:
            raise ValueError("margin: abs needs margin_value")
        check_choice("fisher", self.fisher, FISHER_SOURCES)
        check_choice("fallback", self.fallback, FALLBACKS)
        self.margin_scale, self.quantile, self.d_margin = float(self.margin_scale), float(self.quantile), float(
            self.d_margin)
        self.momentum, self.fisher_beta = float(self.momentum), float(self.fisher_beta)
        self.fisher_size, self.fisher_batch_size = int(self.fisher_size), int(self.fisher_batch_size)


EATA_PRESETS = {
    "orig": {"margin": "abs_lnC", "margin_value": None, "fisher": "off", "fallback": "none"},
    "vtr_tta": {"margin": "abs", "margin_value": 0.40, "fisher": "off", "fallback": "lowest"},
}


class EATAAdapter(GalleryEntropyAdapter):
    """Sample-efficient entropy minimisation with anti-forgetting (module docstring).

    Args:
        margin: ``abs_lnC`` | ``abs`` | ``quantile`` (None = preset).
        margin_scale: the 0.4 of E0 = 0.4·ln C (EATA ``main.py``).
        margin_value: E0 for ``margin: abs`` (None = preset: ``vtr_tta`` 0.40).
        quantile: share of the batch kept by ``margin: quantile``.
        d_margin: ε of the redundancy filter (Eq. 5).
        momentum: the 0.9 of m <- 0.9·m + 0.1·mean p (Eq. 4).
        fisher: ``off`` (ETA) | ``train_split`` (None = preset).
        fisher_beta: β of the Fisher term (Eq. 8).
        fisher_size: clean training-split queries for the Fisher (EATA ``--fisher_size``).
        fisher_batch_size: their batch size (EATA ``main.py`` batch 64).
        fallback: ``none`` | ``lowest`` (vtr_tta's replacement of empty sets; None = preset).
        **kwargs: :class:`~tta.adapters.components.entropy.GalleryEntropyAdapter` options (temperature, preset, lr, ...).
    """

    selected_key = "eata/s2"  # logged as the selected-sample fraction
    option_types = (EATAOptions,)
    state_keys = ("running_probs", "fishers", "anchors")

    def __init__(self, margin: str | None = None, margin_scale: float = 0.4, margin_value: float | None = None,
                 quantile: float = 0.4, d_margin: float = 0.05, momentum: float = 0.9, fisher: str | None = None,
                 fisher_beta: float = 2000.0, fisher_size: int = 2000, fisher_batch_size: int = 64,
                 fallback: str | None = None, lr: float | dict = 3e-4, **kwargs):
        super().__init__(lr=lr, **kwargs)
        o = build_options(EATAOptions, dict(
            margin=margin, margin_scale=margin_scale, margin_value=margin_value, quantile=quantile, d_margin=d_margin,
            momentum=momentum, fisher=fisher, fisher_beta=fisher_beta, fisher_size=fisher_size,
            fisher_batch_size=fisher_batch_size, fallback=fallback), presets=EATA_PRESETS, preset=self.preset)
        self.margin, self.margin_value, self.margin_scale = o.margin, o.margin_value, o.margin_scale
        self.quantile, self.d_margin, self.momentum = o.quantile, o.d_margin, o.momentum
        self.fisher_source, self.fallback = o.fisher, o.fallback
        self.fisher_beta, self.fisher_size, self.fisher_batch_size = o.fisher_beta, o.fisher_size, o.fisher_batch_size
        self.running_probs: torch.Tensor | None = None  # m, (G,)
        self.fishers: list[torch.Tensor] | None = None  # F per adapted tensor
        self.anchors: list[torch.Tensor] | None = None  # θ⁰ per adapted tensor

    # --------------------------------------------------------------------------------------- selection
    def select(self, entropies: torch.Tensor, probs: torch.Tensor,
               e0: float | torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(b,) masks of S1 (reliable) and S2 ⊆ S1 (reliable and non-redundant), decided on the device.

        Args:
            entropies: (b,) E_i, detached.
            probs: (b, G) p_i, detached.
            e0: the margin E0.
        """
        s1 = entropies <= e0 if self.margin == "quantile" else entropies < e0
        if self.fallback == "lowest":  # an empty S1: the ⌈0.25·b⌉ lowest entropies
            k = max(1, math.ceil(0.25 * entropies.numel()))
            s1 = torch.where(s1.any(), s1, lowest(entropies, torch.ones_like(s1), k))
        if self.running_probs is None:  # no running mean yet: S2 = S1
            return s1, s1
        m = self.running_probs
        cos = F.cosine_similarity(m.unsqueeze(0), probs, dim=1)
        s2 = s1 & ((cos.abs() < self.d_margin) | m[0].isnan())  # a NaN m: no query has been selected yet
        if self.fallback == "lowest":  # an empty S2: the ⌈0.1·|S1|⌉ lowest entropies of S1
            k = torch.ceil(0.1 * s1.sum().double()).clamp(min=1)
            s2 = torch.where(s2.any(), s2, lowest(entropies, s1, k))
        return s1, s2

    def update_running_probs(self, probs: torch.Tensor, selected: torch.Tensor) -> None:
        """m from the rows of ``probs`` (b, G) that ``selected`` (b,) keeps (Eq. 4), on the device; unchanged when
        it keeps none (a NaN m until a first query is selected)."""
        n = selected.sum()
        mean = torch.where(selected.unsqueeze(1), probs, 0.0).sum(dim=0) / n.clamp(min=1)
        m = self.running_probs
        if m is None:
            m = torch.full_like(mean, float("nan"))
        blended = torch.where(m[0].isnan(), mean, self.momentum * m + (1.0 - self.momentum) * mean)
        self.running_probs = torch.where(n > 0, blended, m)

    # ------------------------------------------------------------------------------------------- loss
    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor:
        """fw.sims: (b, G) -> the weighted entropy of S2 plus the Fisher term; no update when S2 is empty
        (:meth:`~tta.adapters.base.OnlineAdapter.update_only_if`: nothing read back to decide it)."""
        if self.fisher_source != "off" and self.fishers is None:
            self.prepare()
        logits = self.logits(fw.sims)
        entropies = softmax_entropy(logits)
        probs = logits.detach().softmax(dim=-1)
        e0 = self.threshold(entropies, on_device=True)
        s1, s2 = self.select(entropies.detach(), probs, e0)
        b, n2 = entropies.numel(), s2.sum()
        self.note("eata/s1", s1.sum(), of=b)
        self.note("eata/s2", n2, of=b)
        self.update_running_probs(probs, s2)
        self.update_only_if(n2 > 0)
        weights = torch.exp(e0 - entropies.detach())
        loss = torch.where(s2, weights * entropies, 0.0).sum() / n2.clamp(min=1)
        self.note_value("eata/entropy", torch.where(n2 > 0, loss.detach(), float("nan")))
        if self.fishers is not None:
            penalty = self.fisher_penalty()
            self.note_value("eata/fisher", torch.where(n2 > 0, penalty.detach(), float("nan")))
            loss = loss + penalty
        return loss

    def fisher_penalty(self) -> torch.Tensor:
        """β Σ_θ F_θ (θ − θ⁰)² over the adapted tensors (Eq. 8)."""
        terms = [(f * (p - a) ** 2).sum() for p, f, a in zip(self.params_to_adapt(), self.fishers, self.anchors, strict=True)]
        return self.fisher_beta * torch.stack(terms).sum()

    # ----------------------------------------------------------------------------------------- Fisher
    def needs_source_split(self) -> int:
        own = self.fisher_size if self.fisher_source == "train_split" else 0
        return max(own, super().needs_source_split())

    def prepare(self) -> None:
        super().prepare()
        if self.fisher_source == "train_split" and self.fishers is None:
            if self.source_split is None:
                raise RuntimeError("eata fisher=train_split needs clean training-split data (attached by tta.run)")
            self.fishers, self.anchors = self.estimate_fisher(self.source_split)

    def estimate_fisher(self, split) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
        """Diagonal Fisher of the source model on clean queries (Eq. 9, EATA ``main.py``).

        Args:
            split: a :class:`~tta.data.source_split.SourceSplit` (``batches(batch_size)``, ``gallery()``).

        Returns:
            F per adapted tensor (squared batch gradients of the batch-mean cross-entropy to the argmax
            pseudo-labels over the split's gallery, averaged over batches) and θ⁰ (their values now).
        """
        params = self.params_to_adapt()
        gallery = split.gallery().to(self.device)
        fishers = [torch.zeros_like(p) for p in params]
        n_batches = 0
        with torch.enable_grad():
            for batch in split.batches(self.fisher_batch_size):
                batch = {k: v.to(self.device) if torch.is_tensor(v) else v for k, v in batch.items()}
                logits = self.logits(self.similarity(self.encode_queries(batch), gallery))
                loss = F.cross_entropy(logits, logits.detach().argmax(dim=1))
                grads = torch.autograd.grad(loss, params, allow_unused=True)
                for f, g in zip(fishers, grads, strict=True):
                    if g is not None:
                        f.add_(g.detach() ** 2)
                n_batches += 1
        fishers = [f / max(1, n_batches) for f in fishers]
        log.info("EATA Fisher from %d clean %s queries (%d batches)", len(split), self.task, n_batches)
        return fishers, [p.detach().clone() for p in params]

    def reset_state(self) -> None:
        """Clear m (the Fisher and θ⁰ belong to the source model and stay)."""
        self.running_probs = None


def lowest(values: torch.Tensor, among: torch.Tensor, k: int | torch.Tensor) -> torch.Tensor:
    """(b,) mask of the ``k`` lowest ``values`` among those ``among`` keeps (``k`` may be a device value; ties by
    position)."""
    order = torch.where(among, values, math.inf).argsort(stable=True)
    rank = torch.empty_like(order).scatter_(0, order, torch.arange(order.numel(), device=order.device))
    return among & (rank < k)
