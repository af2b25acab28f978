"""The CLIP test transform on video frames (docs/shifts/mlvp.md, "Frames and order of operations").

Both MLVP processing groups end with the CLIP test transform applied to the 12 frames: a bicubic, antialiased
resize of the short side to 224 with no clamp afterwards, a centre crop to 224 and normalisation with the CLIP
mean and std. The reference code builds it from torchvision (``Resize(224, BICUBIC, antialias=True)``,
``CenterCrop(224)``, ``Normalize``) on float tensors; :func:`clip_transform` reproduces it in plain torch,
vectorised over frames and device-agnostic (CPU or CUDA):

* **resize**: ``torch.nn.functional.interpolate(mode="bicubic", antialias=True, align_corners=False)``; the short
  side becomes ``size`` and the long side ``int(size * long / short)`` (truncation), torchvision's rule for an
  integer ``Resize`` size and hence the code-faithful default. ``long_side="round"`` uses ``round`` instead.
  Frames whose short side already equals ``size`` are not resampled (torchvision skips them too). Bicubic can
  over/undershoot ``[0, 1]``; following the spec the result is not clamped.
* **centre crop**: torchvision's convention, ``top = int(round((H - size) / 2.0))`` and likewise ``left``.
* **normalise**: ``(x - mean) / std`` per channel.

Short videos are padded to the sampled length by repeating the last frame (:func:`pad_frames`; docs/shifts/mlvp.md).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import torch.nn.functional as F

__all__ = ["CLIP_MEAN", "CLIP_STD", "clip_transform", "resize_short_side", "center_crop", "normalize", "pad_frames",
           "clip_transform_batch"]

#: CLIP's per-channel RGB mean (on ``[0, 1]`` values).
CLIP_MEAN = (0.48145466, 0.4578275, 0.40821073)
#: CLIP's per-channel RGB standard deviation (on ``[0, 1]`` values).
CLIP_STD = (0.26862954, 0.26130258, 0.27577711)


def _resized_hw(h: int, w: int, size: int, long_side: str) -> tuple[int, int]:
    """Output ``(H, W)`` of a short-side resize to ``size``."""
    short, long = (h, w) if h <= w else (w, h)
    if long_side == "trunc":
        new_long = int(size * long / short)
    elif long_side == "round":
        new_long = int(round(size * long / short))
    else:
        raise ValueError(f"long_side must be 'trunc' or 'round', got {long_side!r}.")
    return (size, new_long) if h <= w else (new_long, size)


def resize_short_side(x: torch.Tensor, size: int = 224, long_side: str = "trunc") -> torch.Tensor:
    """Bicubic, antialiased resize of float ``(T, C, H, W)`` frames so that the short side equals ``size``.

    Args:
        x: Float frames ``(T, C, H, W)``.
        size: Target short side.
        long_side: ``"trunc"`` (torchvision, default) or ``"round"`` for the long side's length.

    Returns:
        Resized float frames (not clamped).
    """
    h, w = x.shape[-2:]
    out_hw = _resized_hw(h, w, size, long_side)
    if out_hw == (h, w):
        return x
    return F.interpolate(x, size=out_hw, mode="bicubic", antialias=True, align_corners=False)


def center_crop(x: torch.Tensor, size: int = 224) -> torch.Tensor:
    """Centre crop of ``(..., H, W)`` to ``size x size`` with torchvision's offset convention.

    Args:
        x: Frames with at least ``size`` rows and columns.
        size: Crop side.

    Returns:
        A view ``x[..., top:top + size, left:left + size]``.

    Raises:
        ValueError: If the frames are smaller than ``size``.
    """
    h, w = x.shape[-2:]
    if h < size or w < size:
        raise ValueError(f"Cannot centre-crop {h}x{w} frames to {size}x{size}; resize them first.")
    top = int(round((h - size) / 2.0))
    left = int(round((w - size) / 2.0))
    return x[..., top : top + size, left : left + size]


def normalize(x: torch.Tensor, mean: Sequence[float] = CLIP_MEAN, std: Sequence[float] = CLIP_STD) -> torch.Tensor:
    """Per-channel ``(x - mean) / std`` of ``(T, C, H, W)`` float frames."""
    m, s = _channel_stats(tuple(mean), tuple(std), x.dtype, x.device)
    return (x - m) / s


@functools.lru_cache(maxsize=16)
def _channel_stats(mean: tuple, std: tuple, dtype: torch.dtype, device: torch.device) -> tuple:
    """The (1, C, 1, 1) mean and std on ``device``, made once: a fresh copy per batch would be a blocking
    host-to-device transfer on CUDA."""
    return (torch.tensor(mean, dtype=dtype, device=device).view(1, -1, 1, 1),
            torch.tensor(std, dtype=dtype, device=device).view(1, -1, 1, 1))


def clip_transform(
    frames: torch.Tensor,
    size: int = 224,
    mean: Sequence[float] = CLIP_MEAN,
    std: Sequence[float] = CLIP_STD,
    channels_first: bool = False,
    long_side: str = "trunc",
) -> torch.Tensor:
    """Applies the CLIP test transform (resize short side, centre crop, normalise) to video frames.

    Args:
        frames: ``(T, H, W, 3)`` frames (``(T, 3, H, W)`` with ``channels_first=True``). uint8 frames are divided
            by 255; floating frames are taken to be in ``[0, 1]`` already (MLVP group B, docs/shifts/mlvp.md).
        size: Output side (224 for CLIP ViT-B).
        mean: Per-channel mean of the normalisation.
        std: Per-channel std of the normalisation.
        channels_first: Whether ``frames`` is ``(T, 3, H, W)``.
        long_side: ``"trunc"`` (torchvision rule, default) or ``"round"``; see the module docstring.

    Returns:
        float32 ``(T, 3, size, size)`` on the device of ``frames``.

    Raises:
        ValueError: If ``frames`` is not a 4-D tensor with 3 channels.
    """
    x = torch.as_tensor(frames)
    if x.ndim != 4:
        raise ValueError(f"Expected 4-D frames (T, H, W, 3) or (T, 3, H, W), got shape {tuple(x.shape)}.")
    if not channels_first:
        x = x.permute(0, 3, 1, 2)
    if x.shape[1] != 3:
        layout = "(T, 3, H, W)" if channels_first else "(T, H, W, 3)"
        raise ValueError(f"Expected RGB frames {layout}, got shape {tuple(frames.shape)}.")
    if x.dtype == torch.uint8:
        x = x.to(torch.float32) / 255.0
    else:
        x = x.to(torch.float32)
    x = resize_short_side(x.contiguous(), size, long_side)
    x = center_crop(x, size)
    return normalize(x, mean, std).contiguous()


def stack_if_alike(clips: list[torch.Tensor]) -> torch.Tensor | list[torch.Tensor]:
    """One tensor when the clips share shape and dtype (one copy to the device), else the list (videos of a real
    dataset differ in size)."""
    first = clips[0]
    if all(c.shape == first.shape and c.dtype == first.dtype for c in clips):
        from torch.utils.data import default_collate

        return default_collate(clips)  # in a loader worker: stacked into shared memory, not copied
    return clips


def clip_transform_batch(clips: torch.Tensor | Sequence[torch.Tensor], size: int = 224) -> torch.Tensor:
    """:func:`clip_transform` of a batch of clips: ``(B, T, H, W, 3)`` frames, or a list of ``(T, H, W, 3)`` clips
    whose sizes differ; returns float32 ``(B, T, 3, size, size)``. Each frame is resampled on its own, so one call
    over the batch gives the same values as one call per clip."""
    if torch.is_tensor(clips):
        return clip_transform(clips.flatten(0, 1), size).unflatten(0, clips.shape[:2])
    return torch.stack([clip_transform(c, size) for c in clips])


def pad_frames(frames: torch.Tensor, n: int) -> torch.Tensor:
    """Pads frames along dim 0 to ``n`` by repeating the last frame (docs/shifts/mlvp.md).

    Args:
        frames: Tensor whose first dimension is time (``T >= 1``).
        n: Target number of frames.

    Returns:
        ``frames`` itself when ``T >= n``, else a tensor with ``n`` frames whose tail repeats ``frames[-1]``.

    Raises:
        ValueError: If ``frames`` has no frames.
    """
    t = frames.shape[0]
    if t == 0:
        raise ValueError("Cannot pad an empty clip: it has no frame to repeat.")
    if t >= n:
        return frames
    tail = frames[-1:].expand(n - t, *frames.shape[1:])
    return torch.cat([frames, tail], dim=0)
