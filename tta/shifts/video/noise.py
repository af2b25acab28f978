"""Low-level noise shifts of MLVP (docs/shifts/mlvp.md, App. E.1): Gaussian and impulse noise, one field per video.

σ_s = 0.08, 0.12, 0.18, 0.26, 0.38 (Table 37; ImageNet-C / Qiu et al.). One N(0, σ²) field of shape H×W×3 is
drawn once per video and added to every frame (temporal consistency, App. E.1):
y = trunc(255 · clip(x/255 + N, 0, 1)). ``temporal_mode``: ``code`` (default, = paper), ``static`` (same as
code for this shift) or ``iid`` (a new field per frame).

Both have vectorised twins over a batch of videos (exact: each video's field comes from its own generator).
"""

from __future__ import annotations

import numpy as np
import torch

from tta.shifts.registry import register_batched, register_video_shift

GAUSSIAN_SIGMA = (0.08, 0.12, 0.18, 0.26, 0.38)
IMPULSE_AMOUNT = (0.03, 0.06, 0.09, 0.17, 0.27)


def _field_frames(temporal_mode: str, t: int) -> int:
    """Frames of a noise field: one per frame for ``iid``, one shared by every frame otherwise."""
    if temporal_mode not in ("code", "static", "iid"):
        raise ValueError(f"temporal_mode must be code, static or iid, got {temporal_mode!r}")
    return t if temporal_mode == "iid" else 1


@register_video_shift("gaussian", level="low")
def gaussian(frames: torch.Tensor, severity: int, generator: torch.Generator, temporal_mode: str = "code") -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3) with Gaussian noise of σ_severity."""
    sigma = GAUSSIAN_SIGMA[severity - 1]
    t, h, w, c = frames.shape
    noise = torch.randn((_field_frames(temporal_mode, t), h, w, c), generator=generator, dtype=torch.float32).to(frames.device) * sigma
    return _add_noise(frames, noise)


def _add_noise(frames: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """trunc(255·clip(x/255 + noise, 0, 1)) of uint8 (T, H, W, 3) frames and a float32 (1 or T, H, W, 3) field.

    On the CPU one frame at a time in NumPy, in place: the same float32 operations (so the same bits) with a
    frame's floats in cache, about twice as fast as whole-clip torch temporaries.
    """
    if frames.is_cuda:
        x = frames.to(torch.float32) / 255.0 + noise
        return (255.0 * x.clamp(0.0, 1.0)).to(torch.uint8)  # float -> uint8 truncates, as the reference code does
    arr, field = frames.numpy(), noise.numpy()
    out = np.empty_like(arr)
    for i in range(arr.shape[0]):
        x = np.divide(arr[i], np.float32(255.0), dtype=np.float32)
        x += field[i % field.shape[0]]
        np.clip(x, 0.0, 1.0, out=x)
        x *= np.float32(255.0)
        np.copyto(out[i], x, casting="unsafe")  # truncation, as .to(torch.uint8)
    return torch.from_numpy(out)


@register_video_shift("impulse", level="low")
def impulse(frames: torch.Tensor, severity: int, generator: torch.Generator, temporal_mode: str = "code") -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3) with salt-and-pepper pixels of total fraction a_severity."""
    t, h, w, _ = frames.shape
    u = torch.rand((_field_frames(temporal_mode, t), h, w, 1), generator=generator)
    return _salt_and_pepper(frames, u, IMPULSE_AMOUNT[severity - 1])


def _salt_and_pepper(frames: torch.Tensor, u: torch.Tensor, a: float) -> torch.Tensor:
    """uint8 (T, H, W, 3) and a uniform field (1 or T, H, W, 1) -> frames with pixels u < a/2 set to 0 and
    u >= 1 - a/2 set to 255 (all channels). Only the a·H·W chosen pixels are written: no full-size comparisons."""
    t, h, w, _ = frames.shape
    out = frames.clone()
    flat = out.view(t, h * w, 3) if u.shape[0] == 1 else out.view(t * h * w, 3)
    u = u.flatten()
    for hit, value in ((u < a / 2, 0), (u >= 1 - a / 2, 255)):
        flat.index_fill_(1 if u.numel() == h * w else 0, hit.nonzero().flatten().to(frames.device), value)
    return out


def _fields(generators, shape: tuple, draw, device) -> torch.Tensor:
    """One field per video, drawn on the CPU from that video's generator as the reference does, then moved."""
    return torch.stack([draw(shape, generator=g) for g in generators]).to(device)


@register_batched("gaussian", exact=True)
def gaussian_batch(frames: torch.Tensor, severity: int, generators, temporal_mode: str = "code") -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same, each video with its own Gaussian field (= :func:`gaussian` per video)."""
    sigma = GAUSSIAN_SIGMA[severity - 1]
    _, t, h, w, c = frames.shape
    shape = (_field_frames(temporal_mode, t), h, w, c)
    noise = _fields(generators, shape, lambda s, generator: torch.randn(s, generator=generator, dtype=torch.float32),
                    frames.device) * sigma
    if frames.is_cuda:
        return _add_noise(frames, noise)
    return torch.stack([_add_noise(clip, field) for clip, field in zip(frames, noise, strict=True)])


@register_batched("impulse", exact=True)
def impulse_batch(frames: torch.Tensor, severity: int, generators, temporal_mode: str = "code") -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same, each video with its own salt-and-pepper mask (= :func:`impulse` per video)."""
    a = IMPULSE_AMOUNT[severity - 1]
    _, t, h, w, _ = frames.shape
    shape = (_field_frames(temporal_mode, t), h, w, 1)
    return torch.stack([_salt_and_pepper(clip, torch.rand(shape, generator=g), a)
                        for clip, g in zip(frames, generators, strict=True)])
