"""The five ImageNet-C corruptions of Qiu et al. (Sec. 2, App. 5.2) that MLVP does not cover, as video shifts.

Qiu et al. perturb images with ImageNet-C's 17 corruptions (Hendrycks & Dietterich, 2019) at its five published
severities; these are glass blur, frost, brightness, contrast and pixelate, with the same constants. Each acts on
the native-resolution frames (group A) and, like the MLVP shifts, draws its randomness once per video and applies
it to every frame. ``frost_approx`` is an approximation: ImageNet-C's frost photographs are not shipped, so its
texture is procedural (:func:`frost_texture`). Constants per severity and each shift's rule, including where it
follows ImageNet-C's code rather than its intent: docs/shifts/robustness-video.md.
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from tta.shifts.registry import register_batched, register_video_shift
from tta.shifts.video.common import numpy_rng, to_uint8, to_unit
from tta.shifts.video.weather import plasma_fractal

GLASS_BLUR = ((0.7, 1, 2), (0.9, 2, 1), (1.0, 2, 3), (1.1, 3, 2), (1.5, 4, 2))  # (sigma, max_delta, passes)
FROST = ((1.0, 0.4), (0.8, 0.6), (0.7, 0.7), (0.65, 0.7), (0.6, 0.75))  # (image weight, frost weight)
BRIGHTNESS = (0.1, 0.2, 0.3, 0.4, 0.5)
CONTRAST = (0.4, 0.3, 0.2, 0.1, 0.05)
PIXELATE = (0.6, 0.5, 0.4, 0.3, 0.25)
#: per-channel (R, G, B) mean and standard deviation, in [0, 1], of the five frost photographs ImageNet-C draws
#: from (frost1..frost5; measured once, the photographs themselves are not shipped): the procedural texture of
#: a video takes the statistics of one of them, drawn uniformly as ImageNet-C draws the photograph. frost2 and
#: frost3 are the same picture (pixel-identical in imagecorruptions 1.1.2), hence two equal rows
FROST_PHOTO_STATS = (
    ((0.305, 0.585, 0.650), (0.106, 0.065, 0.060)),
    ((0.787, 0.805, 0.841), (0.084, 0.087, 0.089)),
    ((0.787, 0.805, 0.841), (0.084, 0.087, 0.089)),
    ((0.540, 0.599, 0.648), (0.112, 0.112, 0.117)),
    ((0.441, 0.484, 0.528), (0.174, 0.170, 0.163)),
)


def _gaussian(x: np.ndarray, sigma: float) -> np.ndarray:
    """scikit-image's ``gaussian`` of (T, H, W, 3) frames per frame and channel: edge mode, truncated at 4σ."""
    from scipy import ndimage  # loaded by the shifts that use it, not by every import of the registry
    return ndimage.gaussian_filter(x, sigma=(0, sigma, sigma, 0), mode="nearest", truncate=4.0)


def glass_shuffle_map(h: int, w: int, delta: int, passes: int, rng: np.random.Generator) -> np.ndarray:
    """Source pixel (flat index) of every pixel after ImageNet-C's sequential local shuffle: int64 (H·W,).

    The reference visits pixel k = (r, c) in order and sets value(k) = value(target(k)), target = (r + dy, c + dx),
    where a target visited earlier in the pass already holds its new value. So value(k) is the pass-start value at
    the target of the first pixel along k -> target(k) -> ... whose target was not visited before it; that chain is
    followed for all pixels at once by pointer doubling (exact, no per-pixel Python loop).
    """
    src = np.arange(h * w)
    rows, cols = np.arange(h - delta, delta, -1), np.arange(w - delta, delta, -1)
    if rows.size == 0 or cols.size == 0:
        return src
    rr, cc = (a.ravel() for a in np.meshgrid(rows, cols, indexing="ij"))
    visited = rr * w + cc  # in visiting order
    order = np.full(h * w, -1)
    order[visited] = np.arange(visited.size)
    k = np.arange(visited.size)
    for _ in range(passes):
        d = rng.integers(-delta, delta, size=(visited.size, 2))  # (dx, dy) per pixel, as the reference draws them
        target = (rr + d[:, 1]) * w + (cc + d[:, 0])
        before = order[target]
        ptr = np.where((before >= 0) & (before < k), before, k)
        while True:
            nxt = ptr[ptr]
            if np.array_equal(nxt, ptr):
                break
            ptr = nxt
        new = src.copy()
        new[visited] = src[target[ptr]]
        src = new
    return src


@register_video_shift("glass_blur", level="low")
def glass_blur(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; ImageNet-C glass blur with one shuffle map for every frame."""
    sigma, delta, passes = GLASS_BLUR[severity - 1]
    t, h, w, _ = frames.shape
    src = glass_shuffle_map(h, w, delta, passes, numpy_rng(generator))
    x = frames.cpu().numpy().astype(np.float64) / 255.0
    x = np.floor(np.clip(_gaussian(x, sigma), 0, 1) * 255.0)  # the reference's np.uint8(...) truncation
    x = x.reshape(t, h * w, 3)[:, src].reshape(t, h, w, 3)
    x = _gaussian(x / 255.0, sigma)
    return to_uint8(torch.from_numpy(x.astype(np.float32))).to(frames.device)


def _ice_pattern(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """Zero-mean, unit-variance ice pattern (H, W): plasma haze + branching crystal strokes + fine grain.

    Crystals start at random seeds (about one per 1,500 pixels) and grow 3-6 arms as persistent random walks
    (2-pixel steps, direction jitter 0.15 rad) that sprout side branches at ±60° (hexagonal ice); strokes are drawn
    antialiased with random brightness and given a soft glow.
    """
    from scipy import ndimage  # loaded by the shifts that use it, not by every import of the registry
    size = 1 << max(1, math.ceil(math.log2(max(h, w))))
    haze = plasma_fractal(size, 2.0, rng)[:h, :w]
    strokes = np.zeros((h, w), np.float32)
    scale = max(h, w)
    seeds = max(4, (h * w) // 1500)
    stack = []
    for _ in range(seeds):
        x0, y0 = rng.uniform(0, w), rng.uniform(0, h)
        arms = int(rng.integers(3, 7))
        base = rng.uniform(0, 2 * math.pi)
        for a in range(arms):
            stack.append((x0, y0, base + 2 * math.pi * a / arms + rng.normal(0, 0.2),
                          rng.uniform(0.02, 0.1) * scale, rng.uniform(0.4, 1.0), 0))
    while stack:
        x, y, ang, length, level, depth = stack.pop()
        pts = [(x, y)]
        for step in range(max(2, int(length / 2))):
            ang += rng.normal(0, 0.15)
            x, y = x + 2 * math.cos(ang), y + 2 * math.sin(ang)
            pts.append((x, y))
            if depth < 2 and step % 4 == 3 and rng.uniform() < 0.35:
                side = ang + rng.choice((-1, 1)) * math.pi / 3
                stack.append((x, y, side, 0.4 * (length - 2 * step), 0.8 * level, depth + 1))
        poly = np.round(np.array(pts) * 16).astype(np.int32)  # 4 fractional bits for sub-pixel strokes
        cv2.polylines(strokes, [poly], False, float(level), 1, cv2.LINE_AA, shift=4)
    strokes = np.maximum(strokes, 0.6 * ndimage.gaussian_filter(strokes, 1.5))
    grain = ndimage.gaussian_filter(rng.standard_normal((h, w)), 0.8)

    def unit(a: np.ndarray) -> np.ndarray:
        s = a.std()
        return (a - a.mean()) / s if s > 0 else a * 0

    z = 0.5 * unit(haze) + 0.8 * unit(strokes) + 0.3 * unit(grain)
    return unit(z)


def frost_texture(h: int, w: int, rng: np.random.Generator) -> np.ndarray:
    """A procedural frost texture, float (H, W, 3) in [0, 255] (RGB).

    One of the five ImageNet-C photographs is drawn uniformly (index draw as in the reference); the texture is
    :func:`_ice_pattern` scaled to that photograph's per-channel mean and spread (:data:`FROST_PHOTO_STATS`), so
    the blend darkens, brightens and tints the frame about as the photograph would; the pattern itself is new.
    """
    mean, std = (np.array(v) for v in FROST_PHOTO_STATS[int(rng.integers(5))])
    z = _ice_pattern(h, w, rng)
    return 255.0 * np.clip(mean + std * z[..., None], 0.0, 1.0)


@register_video_shift(
    "frost_approx", level="low", approximates="frost",
    note="ImageNet-C's frost blend with a procedural frost texture (seeded per video, scaled to the per-channel "
         "statistics of ImageNet-C's photographs), not a crop of its frost photographs")
def frost_approx(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; ImageNet-C's frost blend with one procedural texture per video."""
    a, b = FROST[severity - 1]
    _, h, w, _ = frames.shape
    tex = torch.from_numpy(frost_texture(h, w, numpy_rng(generator)).astype(np.float32)).to(frames.device)
    return to_uint8((a * frames.to(torch.float32) + b * tex) / 255.0)


@register_batched("frost_approx", exact=True)
def frost_approx_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's frost texture from its own generator (= :func:`frost_approx`)."""
    a, b = FROST[severity - 1]
    h, w = frames.shape[2:4]
    tex = np.stack([frost_texture(h, w, numpy_rng(g)).astype(np.float32) for g in generators])
    return to_uint8((a * frames.to(torch.float32) + b * torch.from_numpy(tex).to(frames.device)[:, None]) / 255.0)


@register_video_shift("brightness", level="low")
def brightness(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; HSV value raised by c (hue and saturation kept).

    With hue and saturation fixed, RGB is proportional to V, so the HSV round trip is a rescale by V'/V (a black
    pixel, V = 0, has no hue and saturation 0: it becomes grey V').
    """
    c = BRIGHTNESS[severity - 1]
    x = to_unit(frames)
    v = x.amax(dim=-1, keepdim=True)
    v_new = (v + c).clamp(max=1.0)
    out = torch.where(v > 0, x * (v_new / v.clamp_min(1e-12)), v_new.expand_as(x))
    return to_uint8(out)


@register_video_shift("contrast", level="low")
def contrast(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; each frame's channels pulled towards their own mean by factor c."""
    c = CONTRAST[severity - 1]
    x = to_unit(frames)
    mean = x.mean(dim=(1, 2), keepdim=True)
    return to_uint8((x - mean) * c + mean)


def _per_frame_twin(fn):
    """The batched twin of a shift without randomness that acts on each frame alone: all frames in one call."""
    def twin(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
        return fn(frames.flatten(0, 1), severity, generators[0]).view(frames.shape)
    return twin


register_batched("brightness", exact=True)(_per_frame_twin(brightness))
register_batched("contrast", exact=True)(_per_frame_twin(contrast))


@register_video_shift("pixelate", level="low",
                      deviation="upsampled with nearest neighbour, as the imagecorruptions package does; Hendrycks' "
                                "ImageNet-C code resamples with BOX both ways")
def pixelate(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; PIL box-downsampled by c, nearest-upsampled to the frame size."""
    from PIL import Image

    c = PIXELATE[severity - 1]
    _, h, w, _ = frames.shape
    small = (max(1, int(w * c)), max(1, int(h * c)))
    out = [np.asarray(Image.fromarray(f).resize(small, Image.BOX).resize((w, h), Image.NEAREST))
           for f in frames.cpu().numpy()]
    return torch.from_numpy(np.stack(out)).to(frames.device)
