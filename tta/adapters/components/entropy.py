"""Entropy helpers and the shared base of the entropy baselines (Tent, EATA, SAR, READ) as retrieval TTA.

Retrieval formulation (docs/methods/tent.md): the "classes" are the G gallery items, the logits of query i are
z_ij = s(q_i, g_j) / τ over the whole (precomputed, frozen) gallery, p_i = softmax(z_i) and
H(p) = −Σ_j p_j ln p_j. τ = 0.02 everywhere (HAT-VTR Sec. 5.1, taken from TCR); absolute entropy thresholds
depend on τ, so each method states the τ its thresholds were calibrated at.

:class:`GalleryEntropyAdapter` holds the protocol shared by the four baselines (HAT-VTR Sec. 5.1): the
query-encoder LayerNorm affines, AdamW with weight decay 1e-4, 3 steps per batch, scores from the last pre-update
forward, a reset per shift, the same gallery and similarity as HAT-VTR; the reliability threshold E0
(:meth:`GalleryEntropyAdapter.threshold`); and the ``preset`` switch:

* ``orig`` (default): the objective as in the original repositories;
* ``vtr_tta``: the ``bingqingzhang/vtr_tta`` ports (``tta_model/*.py``), bugs included (docs/methods/<method>.md),
  among them the shared forward of ``tta_base.py`` (``legacy_shared_forward``): CLIP4Clip mean-pools the *raw*
  frame features and normalises afterwards, s(c, v) = <n(c), n(mean_l f_l)>, instead of HAT-VTR's
  <n(c), n(mean_l n(f_l))>. X-Pool starts its pooling with a LayerNorm of every frame, so its scores are the same on
  both paths. The entropy baselines use only the scores, so this is the path's whole effect on them.

A preset fills every option left ``None``; an explicit value always wins (``adapter.method.margin=quantile``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from tta.adapters.base import OnlineAdapter, ProtocolOptions, QueryForward
from tta.adapters.components.options import build_options, check_choice
from tta.utils.bounds import Options
from tta.utils.device_values import ratio

PRESETS = ("orig", "vtr_tta")


def softmax_entropy(logits: torch.Tensor, via_log_softmax: bool = True) -> torch.Tensor:
    """H(softmax(z)) along the last dimension: (..., G) logits -> (...) entropies in nats.

    ``via_log_softmax``: p = exp(log_softmax(z)) (the entropy baselines' ports) or p = softmax(z) (the HAT-VTR and
    TCR code, :mod:`tta.adapters.components.losses`). The two forms agree up to the last bit; each method keeps the
    form of its reference code so that its scores reproduce bit for bit.
    """
    logp = logits.log_softmax(dim=-1)
    if via_log_softmax:
        return -(logp.exp() * logp).sum(dim=-1)
    return -(logits.softmax(dim=-1) * logp).sum(dim=-1)


def elementwise_entropy(logits: torch.Tensor) -> torch.Tensor:
    """The terms −p_j ln p_j of the entropy, not summed: (..., G) -> (..., G)."""
    logp = logits.log_softmax(dim=-1)
    return -(logp.exp() * logp)


def entropy_margin(scale: float, num_classes: int) -> float:
    """E0 = scale · ln C (EATA Eq. 3 and SAR Eq. 2 with scale 0.4; here C = G, docs/methods/eata.md)."""
    return scale * math.log(num_classes)


def shared_forward_similarity(model: nn.Module, queries: torch.Tensor, gallery: torch.Tensor,
                              legacy: bool = False, query_major: bool = False) -> torch.Tensor:
    """(B, G) query-gallery scores; ``legacy`` = the vtr_tta ports' shared forward (module docstring).

    Args:
        model: the retrieval model (``similarity``; ``pool`` is None for CLIP4Clip-meanP).
        queries: (B, T, D) frame features (v2t) or (B, D) caption features (t2v).
        gallery: (G, D) caption features (v2t) or (G, T, D) frame features (t2v).
        legacy: mean-pool raw frames before normalising (CLIP4Clip only; X-Pool is unaffected).
        query_major: v2t legacy product as n(videos) @ n(captions)ᵀ (the TCR port) instead of the transpose of
            n(captions) @ n(videos)ᵀ (the entropy baselines' port); equal up to the last bit, kept per method.
    """
    if not legacy or getattr(model, "pool", None) is not None:
        return model.similarity(queries, gallery)
    videos_are_queries = queries.dim() == 3
    video, text = (queries, gallery) if videos_are_queries else (gallery, queries)
    v = F.normalize(video.mean(dim=1), dim=-1)
    t = F.normalize(text, dim=-1)
    if videos_are_queries and query_major:
        return v @ t.t()
    sims = t @ v.t()  # (Nt, Nv)
    return sims.t() if videos_are_queries else sims


@dataclass
class EntropyOptions(Options):
    """Options shared by the entropy baselines (:class:`GalleryEntropyAdapter`)."""

    preset: str = "orig"
    legacy_shared_forward: bool | None = None

    def __post_init__(self):
        super().__post_init__()
        self.preset = check_choice("preset", self.preset, PRESETS)
        self.legacy_shared_forward = bool(self.legacy_shared_forward)


ENTROPY_PRESETS = {"orig": {"legacy_shared_forward": False}, "vtr_tta": {"legacy_shared_forward": True}}


class GalleryEntropyAdapter(OnlineAdapter):
    """Base of Tent, EATA, SAR and READ: gallery logits at temperature τ on the shared protocol.

    Args:
        temperature: τ of z = s / τ.
        preset: ``orig`` or ``vtr_tta`` (module docstring).
        legacy_shared_forward: None = the preset's value (``vtr_tta``: true).
        steps, lr, weight_decay, betas, reset_policy, predict_with: see :class:`OnlineAdapter`.
    """

    option_types = (EntropyOptions,)

    def __init__(self, temperature: float = 0.02, preset: str = "orig", legacy_shared_forward: bool | None = None,
                 steps: int = 3, lr: float | dict = 3e-5, weight_decay: float = 1e-4, **kwargs):
        super().__init__(steps=steps, lr=lr, weight_decay=weight_decay, **kwargs)
        ProtocolOptions(steps, lr, weight_decay, self.betas, temperature)
        opts = build_options(EntropyOptions, {"preset": preset, "legacy_shared_forward": legacy_shared_forward},
                             presets=ENTROPY_PRESETS, preset=preset)
        self.temperature, self.preset = float(temperature), opts.preset
        self.legacy_shared_forward = opts.legacy_shared_forward

    # ------------------------------------------------------------------------------------------ protocol
    def params_to_adapt(self) -> list[nn.Parameter]:
        """The query-encoder LayerNorm affines."""
        return self.query_layernorm_params()

    def similarity(self, feats: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
        return shared_forward_similarity(self.model, feats, gallery, self.legacy_shared_forward)

    def forward_queries(self, batch: dict) -> QueryForward:
        feats = self.encode_queries(batch)
        return QueryForward(feats=feats, sims=self.similarity(feats, self.gallery))

    def logits(self, sims: torch.Tensor) -> torch.Tensor:
        """(B, G) gallery logits z = s / τ."""
        return sims / self.temperature

    def threshold(self, entropies: torch.Tensor, on_device: bool = False) -> float | torch.Tensor:
        """E0 for this batch from its (b,) entropies, by ``self.margin``: ``abs_lnC`` (margin_scale·ln G),
        ``abs`` (margin_value) or ``quantile`` (the k-th smallest entropy, k = max(1, ⌊quantile·b⌋), a device
        value with ``on_device``)."""
        if self.margin == "abs_lnC":
            return entropy_margin(self.margin_scale, self.gallery.shape[0])
        if self.margin == "abs":
            return float(self.margin_value)
        k = max(1, int(self.quantile * entropies.numel()))
        kth = entropies.detach().sort().values[k - 1]
        return kth if on_device else float(kth)

    # ------------------------------------------------------------------------------------------ counters
    def note(self, key: str, count: int | float | torch.Tensor, of: int | None = None) -> None:
        """Record a per-step quantity: summed in ``counters[key]``, per step in the batch's ``extras[key]``
        (history.json); with ``of`` (the batch size) also the running rate ``counters[key + '_rate']``. A device
        ``count`` keeps them device values until the end of the stream."""
        self.counters[key] = self.counters.get(key, 0) + count
        if of is not None:
            seen = self.counters[key + "_of"] = self.counters.get(key + "_of", 0) + of
            self.counters[key + "_rate"] = ratio(self.counters[key], max(1, seen))
        if self.record is not None:
            self.record.extras.setdefault(key, []).append(ratio(count, of) if of else count)

    def note_value(self, key: str, value: torch.Tensor | float) -> None:
        """Record a per-step value (e.g. a loss term) in the batch's ``extras[key]`` only; a tensor stays on its
        device until the history is read back at the end (:mod:`tta.utils.device_values`)."""
        if self.record is not None:
            self.record.extras.setdefault(key, []).append(value.detach() if torch.is_tensor(value) else float(value))
