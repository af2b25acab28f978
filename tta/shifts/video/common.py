"""Helpers shared by the MLVP video shifts (docs/shifts/mlvp.md: frames, seeding): per-item random streams, the per-item context
the data pipeline hands to shifts that need more than pixels, and float <-> uint8 conversions.

Randomness: :func:`tta.shifts.perturb_video` seeds one ``torch.Generator`` from the item seed
(:func:`tta.shifts.item_seed`, SHA-256 of ``"{seed}/{video_id}/{shift}/{severity}"``, docs/shifts/mlvp.md, seeding). Shifts that follow the
reference code's NumPy / Python ``random`` draws derive one NumPy ``Generator`` and one ``random.Random`` from it
(:func:`numpy_rng`, :func:`python_rng`), always in the same order, so output is independent of batch order,
workers and device. Random fields are drawn on the CPU and moved to the frames' device (bit-identical on CUDA).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

#: float -> uint8 "trunc" (floor) of the reference code; the guard absorbs float32 round-off such as
#: 127.99998 for an exact 128 (the reference computes in float64, where such values are exact).
TRUNC_GUARD = 1e-3


@dataclass
class ShiftContext:
    """What the pipeline knows about the clip besides its pixels (shifts that need it take ``context=``).

    Attributes:
        video_id: the item id (seeds are derived from it upstream).
        num_frames: frames per clip (12 in the protocol); group-B shifts that sample themselves return this many.
        frame_indices: original frame index of each sampled frame (group A; keys of the main-objects JSON).
        fps: frame rate of the container (group B; H.264 needs it).
        caption: the ground-truth caption of the item, if known (event-insertion fallback query, docs/shifts/mlvp.md, code vs paper).
        main_objects: this video's entry of ``{dataset}_main_objects.json`` (docs/shifts/mlvp.md, main-object metadata), or ``None``.
        resources: run-level objects, e.g. ``{"donor_pool": DonorPool}`` (event insertion, docs/shifts/mlvp.md, App. E.3).
        clip_key: the frame cache's key of the clip's uniform frames (the file's path, size and modification time,
            the frame count and the size limit); set for group-B shifts registered with ``accepts_sampled``.
        clip: those uniform frames, uint8 (num_frames, H, W, 3), when ``clip_key`` is set.
        sampled: the frames handed to the shift are ``clip`` rather than the whole video. Only a shift registered
            with ``accepts_sampled`` is called so; it raises :class:`WholeVideoNeeded` when what it would need the
            whole video for is not stored.
    """

    video_id: str = ""
    num_frames: int = 12
    frame_indices: Sequence[int] | None = None
    fps: float | None = None
    caption: str | None = None
    main_objects: dict | None = None
    resources: dict[str, Any] = field(default_factory=dict)
    clip_key: str | None = None
    clip: torch.Tensor | None = None
    sampled: bool = False


class WholeVideoNeeded(Exception):
    """A shift called with the uniform frames alone (``ShiftContext.sampled``) needs every decoded frame after all."""


def numpy_rng(generator: torch.Generator) -> np.random.Generator:
    """A NumPy generator derived from the item's torch generator (one 63-bit draw)."""
    return np.random.default_rng(int(torch.randint(0, 2**63 - 1, (1,), generator=generator).item()))


def python_rng(generator: torch.Generator) -> random.Random:
    """A Python ``random.Random`` derived from the item's torch generator (one 63-bit draw)."""
    return random.Random(int(torch.randint(0, 2**63 - 1, (1,), generator=generator).item()))


def to_unit(frames: torch.Tensor) -> torch.Tensor:
    """uint8 (T, H, W, 3) -> float32 in [0, 1] (same device)."""
    return frames.to(torch.float32) / 255.0


def to_uint8(x: torch.Tensor) -> torch.Tensor:
    """float in [0, 1] -> uint8 by clip and truncation (``trunc(255 * clip(x, 0, 1))``, spec notation)."""
    return (255.0 * x.clamp(0.0, 1.0) + TRUNC_GUARD).clamp(max=255.0).to(torch.uint8)


def check_temporal_mode(mode: str) -> str:
    """Validate ``temporal_mode`` (docs/shifts/mlvp.md, seeding): ``code`` (default), ``static`` or ``iid``."""
    if mode not in ("code", "static", "iid"):
        raise ValueError(f"temporal_mode must be code, static or iid, got {mode!r}")
    return mode
