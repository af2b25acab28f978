"""``adapter=tcr``: TCR (Li et al., ICLR 2025) for video-text retrieval (defaults and deviations: docs/methods/tcr.md).

Per step: candidates c_i = gallery[argmax_j S_ij] on the raw S; at step 0 of the first ``update_batches`` batches the
⌊ρ·b⌋ pairs with the smallest stability indicator enter a queue that keeps the ``queue_size`` smallest; the loss is
L_REM (= HAT-VTR's L_NA with E_m = the queue's max entropy) + L_UNI (uniformity, t = 10) + L_EMG (squared difference
of the batch's and the queue's modality gaps). The scores are the raw S (no hubness handling).

Presets: ``tcr`` (the retrieval code of XLearning-SCU/2025-ICLR-TCR on HAT-VTR's feature convention: per-frame
normalised frames averaged without renormalisation; an empty L_REM mask gives 0) and ``vtr_tta`` (the port in
bingqingzhang/vtr_tta, bugs included: the shared forward mean-pools raw frames for CLIP4Clip, the loss features are
unnormalised frame means, an empty mask gives NaN, ⌊ρ·b⌋ without a floor of 1).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tta.adapters.base import BatchRecord, OnlineAdapter, ProtocolOptions, QueryForward, RunningMean
from tta.adapters.components.entropy import shared_forward_similarity
from tta.adapters.components.losses import (
    empty_mask_choice,
    in_batch_entropy,
    modality_gap,
    noise_aware_entropy,
    uniformity,
)
from tta.adapters.components.memory import ReliableMemory
from tta.adapters.components.options import build_options
from tta.utils.bounds import NON_NEGATIVE, POSITIVE, UNIT, Int, Options, bound
from tta.utils.device_values import ratio


@dataclass
class TCROptions(Options):
    """TCR's options (None = the preset's value; :class:`TCRAdapter` documents each)."""

    queue_size: int = bound(Int(1), 16)
    ratio: float = bound(UNIT, 0.3)
    update_batches: int | None = bound(Int(0, null="every batch"), 10)
    uni_t: float = bound(POSITIVE, 10.0)
    w_rem: float = bound(NON_NEGATIVE, 1.0)
    w_uni: float = bound(NON_NEGATIVE, 1.0)
    w_emg: float = bound(NON_NEGATIVE, 1.0)
    empty_mask: str | None = None
    legacy_shared_forward: bool | None = None
    min_one: bool | None = None
    eps: float = bound(POSITIVE, 1e-3)

    def __post_init__(self):
        super().__post_init__()
        self.empty_mask = empty_mask_choice(self.empty_mask)
        self.uni_t, self.eps = float(self.uni_t), float(self.eps)


TCR_PRESETS = {
    "tcr": {"empty_mask": "zero", "legacy_shared_forward": False, "min_one": True},
    "vtr_tta": {"empty_mask": "nan", "legacy_shared_forward": True, "min_one": False},
}


class TCRAdapter(OnlineAdapter):
    """TCR.

    Args:
        steps, lr, weight_decay, betas, reset_policy, predict_with: see :class:`OnlineAdapter`.
        temperature: τ of the in-batch logits (TCR's own, 0.02).
        preset: ``tcr`` or ``vtr_tta`` (module docstring); sets the defaults of the three options below.
        queue_size: entries kept (the batch size in both codes: 16 under the protocol).
        ratio: share of a batch pushed to the queue (0.3).
        update_batches: batches (after a reset) whose step 0 updates the queue (10).
        uni_t: t of exp(−‖·‖/t) in L_UNI (the code's 0.1 multiplies the distance).
        w_rem, w_uni, w_emg: loss weights (the code sums them unweighted).
        empty_mask: ``zero`` | ``skip`` | ``nan`` for an empty L_REM mask (None = preset).
        legacy_shared_forward: the vtr_tta port's forward (None = preset).
        min_one: push max(1, ⌊ρ·b⌋) pairs (None = preset).
    """

    selected_key = "selected_frac"  # logged as the selected-sample fraction
    state_keys = ("queue", "queue_accuracy")
    option_types = (TCROptions,)

    def __init__(self, steps: int = 3, lr: float | dict = 3e-4, weight_decay: float = 1e-4,
                 betas: tuple[float, float] = (0.9, 0.999), reset_policy: str = "per_shift",
                 predict_with: str = "last_forward", temperature: float = 0.02, preset: str = "tcr",
                 queue_size: int = 16, ratio: float = 0.3, update_batches: int | None = 10, uni_t: float = 10.0,
                 w_rem: float = 1.0, w_uni: float = 1.0, w_emg: float = 1.0, empty_mask: str | None = None,
                 legacy_shared_forward: bool | None = None, min_one: bool | None = None, eps: float = 1e-3):
        super().__init__(steps=steps, lr=lr, weight_decay=weight_decay, betas=betas, reset_policy=reset_policy,
                         predict_with=predict_with)
        ProtocolOptions(steps, lr, weight_decay, betas, temperature)
        o = build_options(TCROptions, dict(
            queue_size=queue_size, ratio=ratio, update_batches=update_batches, uni_t=uni_t,
            w_rem=w_rem, w_uni=w_uni, w_emg=w_emg, empty_mask=empty_mask, legacy_shared_forward=legacy_shared_forward,
            min_one=min_one, eps=eps), presets=TCR_PRESETS, preset=preset)
        self.preset, self.empty_mask, self.legacy = preset, o.empty_mask, o.legacy_shared_forward
        self.temperature, self.uni_t, self.eps = float(temperature), o.uni_t, o.eps
        self.weights = {"rem": float(o.w_rem), "uni": float(o.w_uni), "emg": float(o.w_emg)}
        self.queue = ReliableMemory(o.queue_size, o.ratio, "tcr_stable", o.min_one, o.update_batches)
        self.queue_accuracy = RunningMean()
        self.counters.update({"rem_selected": 0, "rem_candidates": 0, "rem_empty_mask": 0})

    def params_to_adapt(self) -> list[nn.Parameter]:
        return self.query_layernorm_params()

    def reset_state(self) -> None:
        self.queue.reset()

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        record.extras["steps"] = []

    def on_batch_end(self, record: BatchRecord) -> None:
        acc = self.queue.accuracy
        if torch.is_tensor(acc):  # a device value, read back with the history at the end
            record.extras["queue_accuracy"] = acc
            self.counters["queue_accuracy_mean"] = self.queue_accuracy.add(acc.double())
        if self.counters["rem_candidates"]:
            self.counters["rem_selected_frac"] = ratio(self.counters["rem_selected"], self.counters["rem_candidates"])
        self.counters["queue_size"] = len(self.queue)

    # ------------------------------------------------------------------------------------------ features
    def forward_queries(self, batch: dict) -> QueryForward:
        """The model's similarity; the vtr_tta port mean-pools raw CLIP4Clip frames, then normalises."""
        feats = self.encode_queries(batch)
        sims = shared_forward_similarity(self.model, feats, self.gallery, self.legacy, query_major=True)
        return QueryForward(feats=feats, sims=sims)

    def pairs(self, feats: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(q (b, D), c (b, D)): query features and candidate features (frame means for videos)."""
        if self.task == "v2t":
            q = feats.mean(dim=1) if self.legacy else F.normalize(feats, dim=-1).mean(dim=1)
            return q, F.normalize(self.gallery[idx], dim=-1)
        frames = self.gallery[idx]
        c = frames.mean(dim=1) if self.legacy else F.normalize(frames, dim=-1).mean(dim=1)
        return F.normalize(feats, dim=-1), c

    # ---------------------------------------------------------------------------------------------- loss
    def adapt_loss(self, fw: QueryForward, step: int) -> torch.Tensor | None:
        idx = fw.sims.detach().argmax(dim=1)
        q, c = self.pairs(fw.feats, idx)
        entropy = in_batch_entropy(q, c, self.temperature)
        if step == 0:
            self.queue.update(q.detach(), c.detach(), entropy.detach(), self.is_relevant(idx, self.batch_index))
        if self.queue.empty:
            raise RuntimeError("the TCR queue is empty: floor(0.3*b) = 0 on the first batch (the reference code "
                               "fails here; set min_one=true)")
        rem = noise_aware_entropy(entropy, self.queue.max_entropy, self.eps, self.empty_mask)
        self.counters["rem_selected"] += rem.selected
        self.counters["rem_candidates"] += rem.candidates
        self.counters["rem_empty_mask"] += rem.empty
        if rem.loss is None:
            return None
        margin = modality_gap(self.queue.query, self.queue.target)
        terms = {"rem": rem.loss, "uni": uniformity(q, self.uni_t), "emg": (modality_gap(q, c) - margin) ** 2}
        if self.record is not None:
            self.record.extras["steps"].append({"step": step, "selected_frac": rem.selected_frac,
                                                 **{f"L_{k}": v.detach() for k, v in terms.items()}})
        total = sum(self.weights[k] * v for k, v in terms.items() if self.weights[k])
        return total if isinstance(total, torch.Tensor) and total.requires_grad else None
