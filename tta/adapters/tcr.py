"""``adapter=tcr``: TCR (Li et al., ICLR 2025) for video-text retrieval (spec/baselines.md §7-8).

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

import math

import torch
import torch.nn.functional as F
from torch import nn

from tta.adapters.base import BatchRecord, OnlineAdapter, QueryForward
from tta.adapters.losses import empty_mask_choice, in_batch_entropy, modality_gap, noise_aware_entropy, uniformity
from tta.adapters.memory import ReliableMemory

PRESETS = {
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

    def __init__(self, steps: int = 3, lr: float | dict = 3e-4, weight_decay: float = 1e-4,
                 betas: tuple[float, float] = (0.9, 0.999), reset_policy: str = "per_shift",
                 predict_with: str = "last_forward", temperature: float = 0.02, preset: str = "tcr",
                 queue_size: int = 16, ratio: float = 0.3, update_batches: int | None = 10, uni_t: float = 10.0,
                 w_rem: float = 1.0, w_uni: float = 1.0, w_emg: float = 1.0, empty_mask: str | None = None,
                 legacy_shared_forward: bool | None = None, min_one: bool | None = None, eps: float = 1e-3):
        super().__init__(steps=steps, lr=lr, weight_decay=weight_decay, betas=betas, reset_policy=reset_policy,
                         predict_with=predict_with)
        if preset not in PRESETS:
            raise ValueError(f"preset must be one of {tuple(PRESETS)}, got {preset!r}")
        defaults = PRESETS[preset]
        self.preset = preset
        self.empty_mask = empty_mask_choice(empty_mask if empty_mask is not None else defaults["empty_mask"])
        self.legacy = legacy_shared_forward if legacy_shared_forward is not None else defaults["legacy_shared_forward"]
        self.temperature, self.uni_t, self.eps = float(temperature), float(uni_t), float(eps)
        self.weights = {"rem": float(w_rem), "uni": float(w_uni), "emg": float(w_emg)}
        self.queue = ReliableMemory(queue_size, ratio, "tcr_stable",
                                    min_one if min_one is not None else defaults["min_one"], update_batches)
        self._batch_index: torch.Tensor | None = None
        self._record: BatchRecord | None = None
        self._acc_sum, self._acc_n = 0.0, 0
        self.counters.update({"rem_selected": 0, "rem_candidates": 0, "rem_empty_mask": 0})

    def params_to_adapt(self) -> list[nn.Parameter]:
        return self.query_layernorm_params()

    def reset_state(self) -> None:
        self.queue.reset()

    def on_batch_start(self, batch: dict, record: BatchRecord) -> None:
        self._batch_index, self._record = batch["index"], record
        record.extras["steps"] = []

    def on_batch_end(self, record: BatchRecord) -> None:
        acc = self.queue.accuracy
        if not math.isnan(acc):
            record.extras["queue_accuracy"] = acc
            self._acc_sum, self._acc_n = self._acc_sum + acc, self._acc_n + 1
            self.counters["queue_accuracy_mean"] = self._acc_sum / self._acc_n
        if self.counters["rem_candidates"]:
            self.counters["rem_selected_frac"] = self.counters["rem_selected"] / self.counters["rem_candidates"]
        self.counters["queue_size"] = len(self.queue)

    # ------------------------------------------------------------------------------------------ features
    def forward_queries(self, batch: dict) -> QueryForward:
        if not (self.legacy and self.model.head_name == "meanp"):
            return super().forward_queries(batch)
        feats = self.encode_queries(batch)
        if self.task == "v2t":  # the port mean-pools raw frames, then normalises
            sims = F.normalize(feats.mean(dim=1), dim=-1) @ F.normalize(self.gallery, dim=-1).t()
        else:
            sims = F.normalize(feats, dim=-1) @ F.normalize(self.gallery.mean(dim=1), dim=-1).t()
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
            correct = self.is_relevant(idx, self._batch_index) if self._batch_index is not None else None
            self.queue.update(q.detach(), c.detach(), entropy.detach(), correct)
        if self.queue.empty:
            raise RuntimeError("the TCR queue is empty: floor(0.3*b) = 0 on the first batch (the reference code "
                               "fails here; set min_one=true)")
        rem = noise_aware_entropy(entropy, self.queue.max_entropy, self.eps, self.empty_mask)
        self.counters["rem_selected"] += rem.selected
        self.counters["rem_candidates"] += rem.candidates
        self.counters["rem_empty_mask"] += int(rem.empty)
        if rem.loss is None:
            return None
        margin = modality_gap(self.queue.query, self.queue.target)
        terms = {"rem": rem.loss, "uni": uniformity(q, self.uni_t), "emg": (modality_gap(q, c) - margin) ** 2}
        if self._record is not None:
            self._record.extras["steps"].append({"step": step, "selected_frac": rem.selected / max(1, rem.candidates),
                                                 **{f"L_{k}": float(v.detach()) for k, v in terms.items()}})
        total = sum(self.weights[k] * v for k, v in terms.items() if self.weights[k])
        return total if isinstance(total, torch.Tensor) and total.requires_grad else None
