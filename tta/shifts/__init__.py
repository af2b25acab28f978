"""Distribution shifts: MLVP video perturbations and text perturbations, seeded per (seed, item, shift, severity).

Public interface::

    perturb_video(frames, name, severity, seed) -> uint8 frames     video_shift_names() -> list[str]
    perturb_text(text, name, severity, seed) -> str                  text_shift_names() -> list[str]

``seed`` is the item's own seed; :func:`item_seed` derives it from (base seed, item id, shift, severity) as
spec/mlvp.md §3 prescribes, so any single video or caption regenerates bit for bit, whatever the order of a run.
"""

from __future__ import annotations

import inspect
import random

import torch

from tta.shifts import text as _text  # noqa: F401  (registers text shifts)
from tta.shifts import video as _video  # noqa: F401  (registers video shifts)
from tta.shifts.registry import check_severity, get_shift, text_names, video_names
from tta.shifts.video.mixed import is_mixed
from tta.utils.seeding import derive_seed

__all__ = ["perturb_video", "perturb_text", "video_shift_names", "text_shift_names", "item_seed", "shift_kind"]


def item_seed(base_seed: int, item_id: str, shift: str, severity: int) -> int:
    """Seed of one item under one shift: SHA-256 of ``"{base_seed}/{item_id}/{shift}/{severity}"``."""
    return derive_seed(base_seed, item_id, shift, severity)


def video_shift_names() -> list[str]:
    return video_names()


def text_shift_names() -> list[str]:
    return text_names()


def shift_kind(name: str) -> str:
    """``clean``, ``video`` or ``text`` (mixed MLVP streams are ``video``)."""
    if name == "clean":
        return "clean"
    return "video" if is_mixed(name) else get_shift(name).kind


def perturb_video(frames: torch.Tensor, name: str, severity: int, seed: int, **options) -> torch.Tensor:
    """Apply a video shift to a decoded clip.

    Args:
        frames: uint8 (T, H, W, 3) native-resolution frames.
        name: a name from :func:`video_shift_names`.
        severity: 1..5.
        seed: the item seed (see :func:`item_seed`).

    Returns:
        uint8 (T', H, W, 3); T' = T except for shifts that change time.

    ``options`` are the shift's keyword options; ``context`` (a :class:`tta.shifts.video.ShiftContext`) is passed
    only to shifts that take one (occlusion boxes, donor pool, frame rate) and dropped for the others.
    """
    info = get_shift(name)
    if info.kind != "video":
        raise ValueError(f"{name!r} is a {info.kind} shift; use perturb_text")
    if frames.dtype != torch.uint8 or frames.dim() != 4 or frames.shape[-1] != 3:
        raise ValueError(f"perturb_video expects uint8 (T, H, W, 3) frames, got {frames.dtype} {tuple(frames.shape)}")
    if "context" in options and "context" not in inspect.signature(info.fn).parameters:
        options.pop("context")
    gen = torch.Generator().manual_seed(int(seed))
    return info.fn(frames, check_severity(info, severity), gen, **options)


def perturb_text(text: str, name: str, severity: int, seed: int, **options) -> str:
    """Apply a text shift to one caption (seeded by the item seed)."""
    info = get_shift(name)
    if info.kind != "text":
        raise ValueError(f"{name!r} is a {info.kind} shift; use perturb_video")
    return info.fn(text, check_severity(info, severity), random.Random(int(seed)), **options)
