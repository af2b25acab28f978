"""Loss terms of HAT-VTR (Zhang et al., 2026, Eq. 7-12) and TCR (Li et al., ICLR 2025).

Conventions (docs/methods/hatvtr.md): every feature is L2-normalised per frame / per caption first; frame means are **not**
renormalised unless the function says so. Shapes: b queries, T frames, D width.

* :func:`noise_aware_entropy` — L_NA (Eq. 11, code form) = TCR's L_REM;
* :func:`uniformity` — L_inter (Eq. 7) = TCR's L_UNI; :func:`intra_uniformity` — L_intra (Eq. 8);
* :func:`global_alignment` — L_global (Eq. 9), the squared difference of modality gaps = TCR's L_EMG;
* :func:`frame_alignment` — L_frame (Eq. 10), MSE of D×D cross-correlations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from tta.adapters.components.entropy import softmax_entropy
from tta.utils.device_values import ratio, without_sync

EMPTY_MASK = ("zero", "skip", "nan")


def empty_mask_choice(value) -> str:
    """Validate an ``empty_mask`` option; YAML and Hydra read a bare ``nan`` as the float NaN, accepted here."""
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    if value not in EMPTY_MASK:
        raise ValueError(f"empty_mask must be one of {EMPTY_MASK}, got {value!r}")
    return value


def in_batch_entropy(query: torch.Tensor, target: torch.Tensor, temperature: float) -> torch.Tensor:
    """(b,) H_i of softmax_j(<q_i, g_j>/τ) over the b in-batch targets (the code form of HAT-VTR Eq. 3).

    Args:
        query: (b, D) query features.
        target: (b, D) the selected target of each query (column i is query i's own target).
    """
    return softmax_entropy(query @ target.t() / temperature, via_log_softmax=False)


@dataclass
class NAResult:
    """L_NA of one step. ``loss`` is None when the mask is empty and ``empty_mask=skip``."""

    loss: torch.Tensor | None
    selected: int | torch.Tensor  # a device value on the sync-free path
    candidates: int
    weights: torch.Tensor

    @property
    def empty(self) -> bool | torch.Tensor:
        return self.selected == 0

    @property
    def selected_frac(self) -> float | torch.Tensor:
        """The share of candidates in A (a device value on the sync-free path)."""
        return ratio(self.selected, max(1, self.candidates))


def noise_aware_entropy(entropy: torch.Tensor, e_m: torch.Tensor | float, eps: float = 1e-3,
                        empty_mask: str = "zero", sample_weight: torch.Tensor | None = None,
                        sync_free: bool | None = None) -> NAResult:
    """L_NA = (1/|A|) Σ_{i∈A} w_i H_i, w_i = max(0, 1 − sg(H_i)/(E_m + eps)), A = {i : H_i ≤ E_m} (Eq. 11, code).

    Args:
        entropy: (b,) H_i (carries the gradient).
        e_m: the threshold E_m (max entropy of the memory).
        eps: the code's 1e-3 in the weight's denominator.
        empty_mask: what an empty A gives (docs/methods/hatvtr.md): ``zero`` (0, the other terms still step), ``skip``
            (no update this step) or ``nan`` (the reference code's NaN mean).
        sample_weight: (b,) extra detached per-query weights (the ``hub_weighting`` hook), or None.
        sync_free: average over A without reading its size back to the host (None: off the CPU, unless
            ``empty_mask=skip``, whose decision needs it); the same loss up to the order of the sum.
    """
    empty_mask = empty_mask_choice(empty_mask)
    h = entropy.detach()
    e_m = torch.as_tensor(e_m, dtype=h.dtype, device=h.device)
    weights = torch.clamp(1.0 - h / (e_m + eps), min=0.0)
    if sample_weight is not None:
        weights = weights * sample_weight.to(weights)
    mask = h <= e_m
    if empty_mask != "skip" and without_sync(h, sync_free):
        count = mask.sum()
        # filled on the device: new_tensor would copy a host value, and that copy waits for the device's queue
        empty = entropy.new_zeros(()) if empty_mask == "zero" else entropy.new_full((), float("nan"))
        # the product before the mask, as the indexed form: a NaN entropy outside a non-empty A gives a NaN gradient
        # there on either path (the base's finite check then skips the update); an empty A gives no gradient at all
        kept = torch.where(count > 0, weights, 0.0)
        mean = torch.where(mask, entropy * kept, 0.0).sum() / count.clamp(min=1)
        return NAResult(loss=torch.where(count > 0, mean, empty), selected=count, candidates=int(h.numel()),
                        weights=weights)
    selected = int(mask.sum())
    if selected == 0:
        loss = {"zero": entropy.new_zeros(()), "skip": None, "nan": entropy.new_full((), float("nan"))}[empty_mask]
    else:
        loss = (entropy * weights)[mask].mean()
    return NAResult(loss=loss, selected=selected, candidates=int(h.numel()), weights=weights)


def uniformity(x: torch.Tensor, t: float = 10.0) -> torch.Tensor:
    """(1/N) Σ_i exp(−‖x_i − x̄‖₂ / t) over the rows of ``x`` (N, D) — L_inter (Eq. 7), TCR's L_UNI."""
    return torch.exp(-(x - x.mean(dim=0)).norm(dim=1) / t).mean()


def intra_uniformity(frames: torch.Tensor, t: float = 10.0) -> torch.Tensor:
    """(1/b) Σ_i (1/T) Σ_ℓ exp(−‖F_iℓ − F̄_i‖₂ / t) for frames (b, T, D) — L_intra (Eq. 8)."""
    return torch.exp(-(frames - frames.mean(dim=1, keepdim=True)).norm(dim=2) / t).mean()


def modality_gap(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """‖(1/N) Σ n(a_i) − (1/M) Σ n(b_j)‖₂ of two sets of vectors (N, D), (M, D)."""
    return (F.normalize(a, dim=-1).mean(dim=0) - F.normalize(b, dim=-1).mean(dim=0)).norm()


def global_alignment(video: torch.Tensor, text: torch.Tensor, target_gap: torch.Tensor) -> torch.Tensor:
    """L_global = (‖mean n(F̄_i) − mean n(z_i)‖₂ − Δ_RM)² (Eq. 9).

    Args:
        video: (b, T, D) frames or (b, D) frame means of the video side (renormalised here).
        text: (b, D) text side.
        target_gap: Δ_RM, the memory's modality gap (:func:`modality_gap` of its entries).
    """
    if video.dim() == 3:
        video = video.mean(dim=1)
    return (modality_gap(video, text) - target_gap) ** 2


def cross_correlation(video: torch.Tensor, text: torch.Tensor, centered: bool = False) -> torch.Tensor:
    """(D, D) (1/N) Σ n(v) n(z)ᵀ over aligned pairs.

    Args:
        video: (b, T, D) frames — every frame is paired with its item's text — or (N, D) vectors.
        text: (b, D) or (N, D).
        centered: subtract both means first (a covariance, as Eq. 10 names it; ``mgcm.centered``).
    """
    v = F.normalize(video, dim=-1)
    z = F.normalize(text, dim=-1)
    if v.dim() == 3:
        z = z.unsqueeze(1).expand_as(v)
        v, z = v.reshape(-1, v.shape[-1]), z.reshape(-1, z.shape[-1])
    if centered:
        v, z = v - v.mean(dim=0), z - z.mean(dim=0)
    return v.t() @ z / v.shape[0]


def frame_alignment(video: torch.Tensor, text: torch.Tensor, target: torch.Tensor, centered: bool = False) -> torch.Tensor:
    """L_frame = (1/D²) Σ_pq (C_batch − C_RM)²_pq (Eq. 10, code form: uncentred cross-correlations).

    Args:
        video: (b, T, D) frames of the video side.
        text: (b, D) text side.
        target: (D, D) C_RM.
    """
    return F.mse_loss(cross_correlation(video, text, centered), target)
