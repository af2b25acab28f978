"""Noise and blur perturbations of Schiappa et al. (NeurIPS 2022 D&B, Sec. 3.1) not in MLVP: shot noise, speckle
noise and zoom blur (ImageNet-C formulas, Hendrycks & Dietterich 2019, applied frame by frame).

``scale: schiappa`` (default) takes the authors' generator's severities, ``scale: imagenet_c`` ImageNet-C's table;
``temporal: static`` (speckle only) draws one field per video as MLVP does. Both noises are drawn by inversion from
one 16-bit uniform integer per value, the same law as a float draw at a fraction of the cost. Constants, formulas
and the sampling's error bounds: docs/shifts/schiappa-video.md, "Noise and blur".
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
import torch.nn.functional as F

from tta.shifts.registry import register_batched, register_video_shift
from tta.shifts.video.common import numpy_rng

SHOT_RATE = {"schiappa": (250, 100, 50, 30, 15), "imagenet_c": (60, 25, 12, 5, 3)}
SPECKLE_SIGMA = {"schiappa": (0.15, 0.20, 0.25, 0.30, 0.35), "imagenet_c": (0.15, 0.20, 0.35, 0.45, 0.60)}
ZOOM_RANGES = ((1.11, 0.01), (1.16, 0.01), (1.21, 0.02), (1.26, 0.02), (1.31, 0.03))


def _table(table: dict, scale: str, severity: int):
    if scale not in table:
        raise ValueError(f"scale must be one of {sorted(table)}, got {scale!r}")
    return table[scale][severity - 1]


def _to_uint8(x: torch.Tensor) -> torch.Tensor:
    """[0,1] float -> uint8 by truncation, as ``np.uint8(np.clip(x, 0, 1) * 255)`` in the reference code."""
    return (x.clamp(0.0, 1.0) * 255.0).to(torch.uint8)


UNIFORM_BITS = 16  # resolution of the uniform draw that both noises invert


@functools.lru_cache(maxsize=2)
def shot_table(c: float) -> np.ndarray:
    """uint8 (256, 2¹⁶): output grey level of pixel value v when the uniform draw is k (Poisson inversion)."""
    from scipy.stats import poisson

    n = 2 ** UNIFORM_BITS
    rate = (np.arange(256, dtype=np.float32) / np.float32(255.0) * np.float32(c)).astype(np.float64)
    cdf = poisson.cdf(np.arange(int(c))[None, :], rate[:, None])  # P(count <= j), j < c
    # draw k gets the smallest j with cdf_j >= (k + 1/2)/n, i.e. count(k) = #{j: k >= start_j}: step starts, summed
    start = np.searchsorted((np.arange(n) + 0.5) / n, cdf.ravel(), side="right").reshape(cdf.shape)
    steps = np.zeros((256, n + 1), np.uint8)
    np.add.at(steps, (np.arange(256)[:, None], start), 1)
    counts = np.cumsum(steps[:, :n], axis=1, dtype=np.uint8)  # <= c <= 250
    grey = _to_uint8(torch.arange(int(c) + 1, dtype=torch.float32) / c).numpy()  # the reference's trunc(255·count/c)
    return grey[counts]


@functools.lru_cache(maxsize=4)
def speckle_factors(sigma: float) -> np.ndarray:
    """float32 (2¹⁶,): σ·Φ⁻¹((k + ½)/2¹⁶), the speckle noise of uniform draw k."""
    from scipy.special import ndtri

    return (sigma * ndtri((np.arange(2 ** UNIFORM_BITS) + 0.5) / 2 ** UNIFORM_BITS)).astype(np.float32)


def _uniform_bits(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.integers(0, 2 ** UNIFORM_BITS, shape, dtype=np.uint16)


@register_video_shift("schiappa_shot_noise", level="low")
def shot_noise(frames: torch.Tensor, severity: int, generator: torch.Generator, scale: str = "schiappa",
               temporal_mode: str = "iid") -> torch.Tensor:
    """Poisson (photon) noise: y = Poisson(x·c)/c, per pixel and frame. uint8 (T, H, W, 3) -> same shape."""
    if temporal_mode != "iid":
        raise ValueError(f"schiappa_shot_noise supports temporal_mode 'iid' only (Poisson noise depends on the "
                         f"pixel value, so there is no single field to repeat), got {temporal_mode!r}")
    table = shot_table(float(_table(SHOT_RATE, scale, severity))).ravel()
    rng = numpy_rng(generator)
    arr = frames.cpu().numpy()
    out = np.empty_like(arr)
    for src, dst in zip(arr, out, strict=True):  # one frame at a time: the index array stays in cache
        idx = src.astype(np.uint32) << UNIFORM_BITS
        idx |= _uniform_bits(rng, src.shape)
        np.take(table, idx, out=dst, mode="clip")  # indices are in range by construction; "clip" skips the check
    return torch.from_numpy(out).to(frames.device)


def _speckle(frames: torch.Tensor, sigma: float, temporal_mode: str, generator: torch.Generator) -> torch.Tensor:
    """y = trunc(255·clip(x + x·n, 0, 1)), n = the speckle factor of each value's uniform draw."""
    if temporal_mode not in ("iid", "static"):
        raise ValueError(f"temporal_mode must be iid or static, got {temporal_mode!r}")
    t = frames.shape[0]
    fac = speckle_factors(float(sigma))
    rng = numpy_rng(generator)
    bits = _uniform_bits(rng, (t if temporal_mode == "iid" else 1, *frames.shape[1:]))
    if frames.is_cuda:
        noise = torch.from_numpy(fac[bits]).to(frames.device)
        x = frames.to(torch.float32) / 255.0
        return _to_uint8(x + x * noise)
    arr = frames.numpy()
    out = np.empty_like(arr)
    for i in range(t):  # one frame at a time, in place: the floats stay in cache
        x = np.divide(arr[i], np.float32(255.0), dtype=np.float32)
        y = np.take(fac, bits[i % bits.shape[0]], mode="clip")  # uint16 draws always index the 2^16 table
        y *= x
        y += x
        np.clip(y, 0.0, 1.0, out=y)
        y *= np.float32(255.0)
        out[i] = y
    return torch.from_numpy(out)


@register_video_shift("schiappa_speckle_noise", level="low")
def speckle_noise(frames: torch.Tensor, severity: int, generator: torch.Generator, scale: str = "schiappa",
                  temporal_mode: str = "iid") -> torch.Tensor:
    """Multiplicative noise: y = x + x·N(0, σ²). uint8 (T, H, W, 3) -> same shape.

    ``temporal_mode``: ``iid`` (a new field per frame, the authors' code) or ``static`` (one field per video).
    """
    return _speckle(frames, _table(SPECKLE_SIGMA, scale, severity), temporal_mode, generator)


def zoom_factors(severity: int) -> list[float]:
    """The zoom factors of one severity, exactly as ``np.arange(1, z_max, step)`` computes them."""
    stop, step = ZOOM_RANGES[severity - 1]
    return [float(z) for z in np.arange(1, stop, step)]


def clipped_zoom(x: torch.Tensor, zoom: float) -> torch.Tensor:
    """Centre crop of ceil(H/z) × ceil(W/z), upsampled by z (corner-aligned bilinear), centre-trimmed to H × W.

    x: float (T, 3, H, W) -> float (T, 3, H, W). Matches SciPy ``zoom(order=1)`` on the crop (ImageNet-C).
    """
    h, w = x.shape[-2:]
    ch, cw = math.ceil(h / zoom), math.ceil(w / zoom)
    top, left = (h - ch) // 2, (w - cw) // 2
    crop = x[..., top:top + ch, left:left + cw]
    oh, ow = round(ch * zoom), round(cw * zoom)  # SciPy's output shape
    up = F.interpolate(crop, size=(oh, ow), mode="bilinear", align_corners=True) if (oh, ow) != (ch, cw) else crop
    th, tw = (oh - h) // 2, (ow - w) // 2
    return up[..., th:th + h, tw:tw + w]


@register_video_shift("schiappa_zoom_blur", level="mid")
def zoom_blur(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Zoom blur: mean of the frame and its clipped zooms. uint8 (T, H, W, 3) -> same shape; deterministic."""
    x = frames.permute(0, 3, 1, 2).to(torch.float32) / 255.0
    zooms = zoom_factors(severity)
    acc = x.clone()
    for z in zooms:
        acc += clipped_zoom(x, z)
    y = acc / (len(zooms) + 1)
    return _to_uint8(y).permute(0, 2, 3, 1).contiguous()


@register_batched("schiappa_speckle_noise", exact=True)
def speckle_noise_batch(frames: torch.Tensor, severity: int, generators, scale: str = "schiappa",
                        temporal_mode: str = "iid") -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's field from its own generator (= :func:`speckle_noise`)."""
    sigma = _table(SPECKLE_SIGMA, scale, severity)
    return torch.stack([_speckle(clip, sigma, temporal_mode, g) for clip, g in zip(frames, generators, strict=True)])


@register_batched("schiappa_zoom_blur", exact=True)
def zoom_blur_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same: every frame of every video through :func:`zoom_blur` at once."""
    n, t = frames.shape[:2]
    return zoom_blur(frames.reshape(n * t, *frames.shape[2:]), severity, generators[0]).reshape(frames.shape)
