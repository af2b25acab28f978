"""``adapter=hatvtr``: HAT-VTR (Zhang et al., 2026, "Robust Test-Time Video-Text Retrieval", Sec. 4).

Per batch (Sec. 4.3 "Pipeline"): ``steps`` × [encode queries → S (B, G) → HSM target selection (Sec. 4.2, Use 1) →
Reliable Memory update at step 0 (Sec. 4.3) → L = L_NA + L_inter + L_intra + L_global + L_frame (Eq. 12) → AdamW
step on the query
encoder's LayerNorms]; the last pre-update S is refined by the HSM (Use 2) and its raw rows enter the bank.

The losses see per-frame features for both backbones; the X-Pool pooled similarity enters only S.
v2t: queries V (b, T, D), targets Y (b, D) captions. t2v: queries X (b, D), targets U (b, T, D) gallery frames; the
intra-video term is omitted and L_MGCM acts through the captions only. Divergences from the paper follow the code by
default and are switchable (docs/methods/hatvtr.md); ``strict_reproduction`` turns on the code's behaviour where the default fixes a
bug or follows the paper (NaN on an empty mask, ⌊ρ·b⌋ without the max(1, ·) guard, the 10%-of-gallery HSM capacity).
The hubness hooks (``loss.hubness_aware``, ``gate``; HAT-VTR App. F) are extensions, off by default.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import nn

from tta.adapters.base import BatchRecord, OnlineAdapter, ProtocolOptions, QueryForward, RunningMean
from tta.adapters.components.entropy import softmax_entropy
from tta.adapters.components.hsm import HSMConfig, HubnessSuppressionMemory
from tta.adapters.components.losses import (
    cross_correlation,
    empty_mask_choice,
    frame_alignment,
    global_alignment,
    in_batch_entropy,
    intra_uniformity,
    modality_gap,
    noise_aware_entropy,
    uniformity,
)
from tta.adapters.components.memory import ReliableMemory, RMConfig
from tta.adapters.components.options import build_options
from tta.adapters.components.profiling import Stopwatch
from tta.metrics.hubness import occurrence_skewness
from tta.utils.bounds import NON_NEGATIVE, POSITIVE, Int, Options, bound
from tta.utils.device_values import ratio

log = logging.getLogger(__name__)


@dataclass
class NAConfig(Options):
    """L_NA options (Eq. 11; docs/methods/hatvtr.md): ``empty_mask`` zero | skip | nan; ``logits`` in_batch | gallery."""

    block: ClassVar[str] = "na"
    empty_mask: str = "zero"
    logits: str = "in_batch"
    eps: float = bound(POSITIVE, 1e-3)

    def __post_init__(self):
        super().__post_init__()
        self.empty_mask = empty_mask_choice(self.empty_mask)
        if self.logits not in ("in_batch", "gallery"):
            raise ValueError(f"na.logits must be in_batch or gallery, got {self.logits!r}")


@dataclass
class LossConfig(Options):
    """Weights (Eq. 12: all 1; 0 switches a term off), the uniformity scale t (Eq. 7-8) and the hubness-aware loss
    hook (App. F.2)."""

    block: ClassVar[str] = "loss"
    uni_t: float = bound(POSITIVE, 10.0)
    w_na: float = bound(NON_NEGATIVE, 1.0)
    w_uni: float = bound(NON_NEGATIVE, 1.0)
    w_cm: float = bound(NON_NEGATIVE, 1.0)
    w_inter: float = bound(NON_NEGATIVE, 1.0)
    w_intra: float = bound(NON_NEGATIVE, 1.0)
    w_global: float = bound(NON_NEGATIVE, 1.0)
    w_frame: float = bound(NON_NEGATIVE, 1.0)
    hubness_aware: str = "off"
    hub_k: int = bound(Int(1), 10)

    def __post_init__(self):
        super().__post_init__()
        if self.hubness_aware not in ("off", "refined_logits", "hub_weighting"):
            raise ValueError(f"loss.hubness_aware must be off, refined_logits or hub_weighting, got {self.hubness_aware!r}")


@dataclass
class MGCMConfig(Options):
    block: ClassVar[str] = "mgcm"
    centered: bool = False


@dataclass
class AdaptConfig(Options):
    block: ClassVar[str] = "adapt"
    enabled: bool = True


@dataclass
class GateConfig(Options):
    """App. F.4: gate the updates on the bank's k-occurrence skewness (``mode`` skip | scale)."""

    block: ClassVar[str] = "gate"
    enabled: bool = False
    metric: str = "k_skewness"
    k: int = bound(Int(1), 10)
    threshold: float = bound(POSITIVE, 1.0)
    mode: str = "skip"

    def __post_init__(self):
        super().__post_init__()
        if self.metric != "k_skewness" or self.mode not in ("skip", "scale"):
            raise ValueError(f"gate.metric must be k_skewness and gate.mode skip|scale, got {self.metric!r}, {self.mode!r}")


@dataclass
class Targets:
    """The selected targets of one step: indices (b,), the video side (b, T, D) frames and the text side (b, D)."""

    idx: torch.Tensor
    query: torch.Tensor  # (b, D) query (video: frame mean, not renormalised)
    target: torch.Tensor  # (b, D) target (video: frame mean, not renormalised)
    video: torch.Tensor  # (b, T, D) per-frame-normalised frames of the video side
    text: torch.Tensor  # (b, D) normalised text side


#: ``strict_reproduction: true``: the reference code where the default fixes a bug or follows the paper (NaN on an
#: empty L_NA mask, ⌊ρ·b⌋ without the max(1, ·) guard, the 10%-of-gallery HSM capacity), forced over the blocks
STRICT_REPRODUCTION = {"na": {"empty_mask": "nan"}, "rm": {"min_one": False}, "hsm": {"capacity": "gallery_fraction"}}


class HATVTRAdapter(OnlineAdapter):
    """HAT-VTR. Nested options mirror docs/methods/hatvtr.md's names (``hsm.alpha``, ``rm.size``, ``na.empty_mask`` ...).

    Args:
        steps, lr, weight_decay, betas, reset_policy, predict_with: see :class:`OnlineAdapter`.
        temperature: τ of the entropy softmax (Eq. 3, 11).
        strict_reproduction: the reference code's behaviour where the default fixes a bug or follows the paper
            (the :data:`STRICT_REPRODUCTION` overrides; docs/methods/hatvtr.md).
        hsm, rm, na, loss, mgcm, adapt, gate: option groups (:class:`HSMConfig`, :class:`RMConfig`, ...).
        profile: accumulate per-component times in ``self.watch.totals`` (benchmarks only).
    """

    selected_key = "selected_frac"  # logged as the selected-sample fraction
    # the bank, the memory and its derived targets; not the normalised gallery copy (_views), rebuilt on demand
    state_keys = ("hsm", "rm", "_rm_targets", "rm_accuracy")
    option_types = (HSMConfig, RMConfig, NAConfig, LossConfig, MGCMConfig, AdaptConfig, GateConfig)

    def __init__(self, steps: int = 3, lr: float | dict = 3e-4, weight_decay: float = 1e-4,
                 betas: tuple[float, float] = (0.9, 0.999), reset_policy: str = "per_shift",
                 predict_with: str = "last_forward", temperature: float = 0.02, strict_reproduction: bool = False,
                 hsm: dict | None = None, rm: dict | None = None, na: dict | None = None, loss: dict | None = None,
                 mgcm: dict | None = None, adapt: dict | None = None, gate: dict | None = None, profile: bool = False):
        ProtocolOptions(steps, lr, weight_decay, betas, temperature)
        self.adapt_cfg = build_options(AdaptConfig, adapt)
        super().__init__(steps=steps if self.adapt_cfg.enabled else 0, lr=lr, weight_decay=weight_decay,
                         betas=betas, reset_policy=reset_policy, predict_with=predict_with)
        self.temperature = float(temperature)
        self.strict_reproduction = bool(strict_reproduction)
        force = STRICT_REPRODUCTION if self.strict_reproduction else {}
        self.hsm_cfg = build_options(HSMConfig, hsm, force=force.get("hsm"))
        self.rm_cfg = build_options(RMConfig, rm, force=force.get("rm"))
        self.na_cfg = build_options(NAConfig, na, force=force.get("na"))
        self.loss_cfg, self.mgcm_cfg = build_options(LossConfig, loss), build_options(MGCMConfig, mgcm)
        self.gate_cfg = build_options(GateConfig, gate)
        if self.strict_reproduction:
            log.info("strict_reproduction: NaN on an empty L_NA mask, floor(rho*b) RM selection, HSM capacity "
                     "max(1, floor(%.2f*G))", self.hsm_cfg.gallery_fraction)
        track = max(self.loss_cfg.hub_k if self.loss_cfg.hubness_aware == "hub_weighting" else 0,
                    self.gate_cfg.k if self.gate_cfg.enabled else 0)
        self.hsm = HubnessSuppressionMemory(self.hsm_cfg, track_k=track)
        self.rm: ReliableMemory | None = None
        self.watch = Stopwatch(profile)
        self._views: tuple | None = None
        self._rm_targets: tuple[torch.Tensor, torch.Tensor] | None = None
        self._gate_factor = 1.0
        self._step_log: dict[str, float] = {}
        self.rm_accuracy = RunningMean()
        self.counters.update({"na_selected": 0, "na_candidates": 0, "na_empty_mask": 0})

    # ------------------------------------------------------------------------------------------------ hooks
    def params_to_adapt(self) -> list[nn.Parameter]:
        return self.query_layernorm_params() if self.adapt_cfg.enabled else []

    def reset_state(self) -> None:
        self.hsm.reset()
        if self.rm is not None:
            self.rm.reset()
        self._rm_targets = None

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        self._gate_factor = self._gate() if self.gate_cfg.enabled else 1.0
        record.extras["steps"] = []

    def on_batch_end(self, record: BatchRecord) -> None:
        accuracy = self.rm.accuracy if self.rm is not None else None
        if torch.is_tensor(accuracy):  # a device value, read back with the history at the end
            record.extras["rm_accuracy"] = self.counters["rm_accuracy_last"] = accuracy
            self.counters["rm_accuracy_mean"] = self.rm_accuracy.add(accuracy.double())  # summed as Python floats were
        if self.gate_cfg.enabled:
            record.extras["gate_factor"] = self._gate_factor
        if self.counters["na_candidates"]:
            self.counters["na_selected_frac"] = ratio(self.counters["na_selected"], self.counters["na_candidates"])
        self.counters["neg_sim_share"] = self.hsm.negative_share
        self.counters.update(self.hsm.bank_stats())
        if self.rm is not None:
            self.counters["rm_size"] = len(self.rm)

    def refine_scores(self, sims: torch.Tensor) -> torch.Tensor:
        with self.watch("hsm"):
            return self.hsm.rerank(sims)

    # ------------------------------------------------------------------------------------------- features
    def _memory(self) -> ReliableMemory:
        if self.rm is None:
            cfg = self.rm_cfg
            self.rm = ReliableMemory(cfg.size_for(self.model.head_name, self.task), cfg.ratio, cfg.selection,
                                     cfg.min_one)
        return self.rm

    def _gallery_views(self) -> tuple[torch.Tensor, torch.Tensor | None]:
        """v2t: (n(Y) (G, D), None); t2v: (frame means (G, D), per-frame-normalised frames (G, T, D))."""
        key = (self.gallery.device, self.gallery.data_ptr())
        if self._views is None or self._views[0] != key:
            g = F.normalize(self.gallery.float(), dim=-1)
            self._views = (key, g, None) if self.task == "v2t" else (key, g.mean(dim=1), g)
        return self._views[1], self._views[2]

    def select_targets(self, fw: QueryForward) -> Targets:
        """HSM-selected targets (Sec. 4.2, Use 1) and the feature views of one step."""
        with self.watch("hsm"):
            idx = self.hsm.select(fw.sims.detach())
        gallery, frames = self._gallery_views()
        q = F.normalize(fw.feats, dim=-1)
        if self.task == "v2t":
            target = gallery[idx]
            return Targets(idx, q.mean(dim=1), target, video=q, text=target)
        return Targets(idx, q, gallery[idx], video=frames[idx], text=q)

    def entropies(self, fw: QueryForward, tg: Targets) -> torch.Tensor:
        """(b,) H_i of the entropy loss: in-batch (code), whole gallery (Eq. 3), or HSM-refined gallery (App. F.2)."""
        if self.loss_cfg.hubness_aware == "refined_logits":
            return softmax_entropy(self.hsm.refine_current(fw.sims) / self.temperature, via_log_softmax=False)
        if self.na_cfg.logits == "gallery":
            return softmax_entropy(fw.sims / self.temperature, via_log_softmax=False)
        return in_batch_entropy(tg.query, tg.target, self.temperature)

    def update_memory(self, tg: Targets, entropy: torch.Tensor) -> None:
        """Step-0 RM update (Sec. 4.3) and the derived targets Δ_RM (Eq. 9) and C_RM (Eq. 10)."""
        rm = self._memory()
        query, target = tg.query.detach(), tg.target
        if self.rm_cfg.renormalize_video_mean:
            if self.task == "v2t":
                query = F.normalize(query, dim=-1)
            else:
                target = F.normalize(target, dim=-1)
        rm.update(query, target, entropy.detach(), self.is_relevant(tg.idx, self.batch_index))
        if rm.empty:
            raise RuntimeError(f"the reliable memory is empty after a batch of {query.shape[0]}: floor(rho*b) = 0 "
                               "(the reference code fails here; docs/methods/hatvtr.md — set rm.min_one)")
        video, text = (rm.query, rm.target) if self.task == "v2t" else (rm.target, rm.query)
        self._rm_targets = (modality_gap(video, text), cross_correlation(video, text, self.mgcm_cfg.centered))

    # ---------------------------------------------------------------------------------------------- losses
    def loss_terms(self, fw: QueryForward, tg: Targets, entropy: torch.Tensor) -> dict[str, torch.Tensor | None]:
        """The weighted-to-be terms of Eq. 12 that have a non-zero weight (L_NA may be None: skip)."""
        w, terms = self.loss_cfg, {}
        if w.w_na:
            weights = self._hub_weights(tg.idx) if w.hubness_aware == "hub_weighting" else None
            na = noise_aware_entropy(entropy, self.rm.max_entropy, self.na_cfg.eps, self.na_cfg.empty_mask, weights)
            self.counters["na_selected"] += na.selected
            self.counters["na_candidates"] += na.candidates
            self.counters["na_empty_mask"] += na.empty
            terms["na"] = na.loss
            self._step_log["selected_frac"] = na.selected_frac
        if w.w_uni * w.w_inter:
            terms["inter"] = uniformity(tg.query, w.uni_t)
        if self.task == "v2t" and w.w_uni * w.w_intra:
            terms["intra"] = intra_uniformity(tg.video, w.uni_t)
        gap, corr = self._rm_targets
        if w.w_cm * w.w_global:
            terms["global"] = global_alignment(tg.video, tg.text, gap)
        if w.w_cm * w.w_frame:
            terms["frame"] = frame_alignment(tg.video, tg.text, corr, self.mgcm_cfg.centered)
        return terms

    def weight_of(self, name: str) -> float:
        w = self.loss_cfg
        return {"na": w.w_na, "inter": w.w_uni * w.w_inter, "intra": w.w_uni * w.w_intra,
                "global": w.w_cm * w.w_global, "frame": w.w_cm * w.w_frame}[name]

    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor | None:
        self._step_log = {"step": step}
        if self.record is not None:
            self.record.extras["steps"].append(self._step_log)
        tg = self.select_targets(fw)
        with self.watch("losses"):
            entropy = self.entropies(fw, tg)
        if step == 0:
            with self.watch("memory"):
                self.update_memory(tg, entropy)
        if self._gate_factor == 0.0:
            return None
        with self.watch("losses"):
            terms = self.loss_terms(fw, tg, entropy)
            if any(v is None for v in terms.values()):
                return None
            self._step_log.update({f"L_{k}": v.detach() for k, v in terms.items()})  # read back at the end
            total = sum(self.weight_of(k) * v for k, v in terms.items())
            if not isinstance(total, torch.Tensor) or not total.requires_grad:
                return None
            return total * self._gate_factor if self._gate_factor != 1.0 else total

    # ------------------------------------------------------------------------------------ hubness hooks
    def _bank_occurrence(self) -> tuple[torch.Tensor, int] | None:
        bank = self.hsm.bank
        if bank is None or bank.occurrence is None or bank.num_rows == 0:
            return None
        return bank.occurrence, bank.num_rows

    def _hub_weights(self, idx: torch.Tensor) -> torch.Tensor | None:
        """min(1, μ / N_k(target_i)), μ = the mean k-occurrence of the bank (``hub_weighting``, App. F.2)."""
        occ = self._bank_occurrence()
        if occ is None:
            return None
        counts = occ[0].to(idx.device).float()
        mean = counts.sum() / counts.numel()
        return (mean / counts[idx].clamp(min=1.0)).clamp(max=1.0)

    def _gate(self) -> float:
        """1 (update), 0 (skip) or a scale from the bank's k-occurrence skewness (App. F.4)."""
        occ = self._bank_occurrence()
        if occ is None:
            return 1.0
        k = min(self.hsm.bank.track_k, occ[0].numel())  # the k the bank counted with
        skew = float(occurrence_skewness(occ[0], k, occ[1]))  # the gate's decision: one read of a batch
        skew = 0.0 if math.isnan(skew) else skew
        if self.gate_cfg.mode == "skip":
            return 1.0 if skew >= self.gate_cfg.threshold else 0.0
        return max(0.0, min(1.0, skew / self.gate_cfg.threshold))
