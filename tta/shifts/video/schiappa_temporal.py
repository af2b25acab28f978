"""Temporal perturbations of Schiappa et al. (NeurIPS 2022 D&B, Sec. 3.1): sampling, reverse sampling, jumbling,
box jumbling and freeze.

The paper gives no severity table; the scales are those of the authors' dataset generator. All five work on the
whole decoded video (group B) and keep the frame count. Where the authors' code and the paper part ways (freeze's
non-monotone table, jumbling's segment lengths), ``anchors`` and the defaults choose; the rules, scales and
differences are in docs/shifts/schiappa-video.md, "Temporal".
"""

from __future__ import annotations

import torch

from tta.shifts.registry import register_video_shift

SAMPLING_RATE = (2, 4, 8, 16, 32)
JUMBLE_SEGMENT = (4, 8, 16, 32, 64)
BOX_JUMBLE_SEGMENT = (2, 4, 8, 16, 32)
FREEZE_FRACTIONS = {  # (fraction of T, floor) per severity
    "monotone": ((0.4, 0), (0.2, 0), (0.1, 0), (0.05, 2), (0.0, 1)),
    "code": ((0.4, 0), (0.2, 0), (0.1, 0), (0.05, 2), (0.1, 1)),
}


def _held_indices(length: int, rate: int, device: torch.device) -> torch.Tensor:
    """Index of the held frame for each output position: floor(j / r) · r, j = 0..T-1."""
    return torch.div(torch.arange(length, device=device), rate, rounding_mode="floor") * rate


@register_video_shift("schiappa_sampling", level="high", group="B")
def sampling(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Slow playback: keep every r-th frame and repeat it r times. frames: uint8 (T, H, W, 3) -> same shape."""
    idx = _held_indices(frames.shape[0], SAMPLING_RATE[severity - 1], frames.device)
    return frames[idx]


@register_video_shift("schiappa_reverse_sampling", level="high", group="B")
def reverse_sampling(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Slow playback backwards: the held frames of :func:`sampling` in reverse order, each shown r times.

    frames: uint8 (T, H, W, 3) -> same shape; output position j shows kept frame K-1-floor(j/r), K = ceil(T/r).
    """
    t = frames.shape[0]
    rate = SAMPLING_RATE[severity - 1]
    kept = torch.arange(0, t, rate, device=frames.device)  # K kept frames
    pos = torch.div(torch.arange(t, device=frames.device), rate, rounding_mode="floor")
    return frames[kept.flip(0)[pos]]


def _segment_ids(length: int, segment: int) -> torch.Tensor:
    return torch.div(torch.arange(length), segment, rounding_mode="floor")


@register_video_shift("schiappa_jumbling", level="high", group="B")
def jumbling(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Shuffle the frames inside consecutive segments of 2^(s+1) frames (the last may be shorter).

    frames: uint8 (T, H, W, 3) -> same shape. One uniform key per frame; sorting by (segment, key) draws an
    independent uniform permutation of every segment in one vectorised step.
    """
    t = frames.shape[0]
    keys = torch.rand(t, generator=generator, dtype=torch.float64)
    order = torch.argsort(_segment_ids(t, JUMBLE_SEGMENT[severity - 1]).to(torch.float64) * 2.0 + keys)
    return frames[order.to(frames.device)]


@register_video_shift("schiappa_box_jumbling", level="high", group="B")
def box_jumbling(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Shuffle the order of consecutive boxes of 2^s frames, keeping the order inside each box.

    frames: uint8 (T, H, W, 3) -> same shape.
    """
    t = frames.shape[0]
    seg = _segment_ids(t, BOX_JUMBLE_SEGMENT[severity - 1])
    n_boxes = int(seg[-1]) + 1
    rank = torch.empty(n_boxes, dtype=torch.long)
    rank[torch.randperm(n_boxes, generator=generator)] = torch.arange(n_boxes)  # new position of each box
    order = torch.argsort(rank[seg] * t + torch.arange(t))
    return frames[order.to(frames.device)]


def freeze_anchor_count(length: int, severity: int, anchors: str = "monotone") -> int:
    """Number of random anchors k drawn by :func:`freeze` (before frame 0 is added)."""
    if anchors not in FREEZE_FRACTIONS:
        raise ValueError(f"anchors must be one of {sorted(FREEZE_FRACTIONS)}, got {anchors!r}")
    fraction, floor = FREEZE_FRACTIONS[anchors][severity - 1]
    return min(length, max(1, int(max(fraction * length, floor))))


@register_video_shift("schiappa_freeze", level="high", group="B")
def freeze(frames: torch.Tensor, severity: int, generator: torch.Generator, anchors: str = "monotone") -> torch.Tensor:
    """Buffering freezes: k random anchor frames (plus frame 0), each held until the next anchor.

    frames: uint8 (T, H, W, 3) -> same shape. ``anchors``: ``monotone`` (default) or ``code`` (module docstring).
    """
    t = frames.shape[0]
    k = freeze_anchor_count(t, severity, anchors)
    chosen = torch.randperm(t, generator=generator)[:k]
    is_anchor = torch.zeros(t, dtype=torch.bool)
    is_anchor[chosen] = True
    is_anchor[0] = True
    # index of the latest anchor at or before j: running maximum of (j if anchor else 0)
    marks = torch.where(is_anchor, torch.arange(t), torch.zeros(t, dtype=torch.long))
    idx = torch.cummax(marks, dim=0).values
    return frames[idx.to(frames.device)]
