"""The image perturbations of Shirnin et al. (Sec. IV-A) that no other suite here covers: grayscale, downscale and
sun flare, as video shifts (group A, native-resolution frames; docs/shifts/robustness-video.md).

Shirnin et al. apply Albumentations' ToGray, Downscale and RandomSunFlare at one strength, without stating their
parameters; the five severities below are ours and put Albumentations' defaults at a named severity:

* ``grayscale`` α = 0.2, 0.4, 0.6, 0.8, 1.0: y = (1 - α)·x + α·Y, Y the BT.601 luma of OpenCV's RGB -> GRAY
  (fixed-point, rounded); severity 5 is ToGray.
* ``downscale`` factor f = 2, 3, 4, 6, 8: resize to round(W/f) × round(H/f) and back to W × H, nearest neighbour
  both ways (``interpolation`` option); severity 3 is Downscale's default scale 0.25.
* ``sun_flare`` source radius r = 0.125, 0.25, 0.375, 0.5, 0.625 × max(H, W): RandomSunFlare's overlay recipe
  (flare centre in the top half, 6-10 ghost discs along a random line through it, then r/10 concentric discs of
  the source colour with cubic alpha fall-off); severity 5 is the default 400-pixel radius on a 640-pixel image.
  One flare per video (same centre, line and ghosts on every frame), composited in float: the recipe is a per-pixel
  affine map y = A·x + B, computed once and applied to every frame (no per-step uint8 rounding).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from tta.shifts.registry import register_batched, register_video_shift
from tta.shifts.video.common import numpy_rng, to_uint8

GRAY_ALPHA = (0.2, 0.4, 0.6, 0.8, 1.0)
DOWNSCALE_FACTOR = (2, 3, 4, 6, 8)
SUN_FLARE_RADIUS = (0.125, 0.25, 0.375, 0.5, 0.625)  # × max(H, W)
FLARE_ROI = (0.0, 0.0, 1.0, 0.5)  # x_min, y_min, x_max, y_max of the flare centre, as fractions of the frame
FLARE_GHOSTS = (6, 10)  # number of ghost discs, inclusive
FLARE_GHOST_ALPHA = (0.05, 0.2)
INTERPOLATION = {"nearest": cv2.INTER_NEAREST, "linear": cv2.INTER_LINEAR, "cubic": cv2.INTER_CUBIC,
                 "area": cv2.INTER_AREA}


def luma(frames: torch.Tensor) -> torch.Tensor:
    """OpenCV's RGB -> GRAY of uint8 (..., 3): (9798 R + 19235 G + 3735 B + 2^14) >> 15, as float (..., 1)."""
    x = frames.to(torch.int32)
    y = (x[..., 0] * 9798 + x[..., 1] * 19235 + x[..., 2] * 3735 + 16384) >> 15
    return y.to(torch.float32)[..., None]


@register_video_shift("grayscale", level="low",
                      deviation="five blend levels towards grey are our own; severity 5 is Albumentations' ToGray")
def grayscale(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; colour blended towards luma by α (full grey at severity 5)."""
    alpha = GRAY_ALPHA[severity - 1]
    x = frames.to(torch.float32)
    return to_uint8(((1 - alpha) * x + alpha * luma(frames)) / 255.0)


@register_batched("grayscale", exact=True)
def grayscale_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same: every frame of every video through :func:`grayscale` at once."""
    return grayscale(frames, severity, generators[0])


@register_video_shift("downscale", level="low",
                      deviation="five factors are our own; severity 3 is Albumentations' Downscale default (scale "
                                "0.25)")
def downscale(frames: torch.Tensor, severity: int, generator: torch.Generator, interpolation: str = "nearest"
              ) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; down- then up-sampled by the severity's factor."""
    if interpolation not in INTERPOLATION:
        raise ValueError(f"downscale interpolation must be one of {sorted(INTERPOLATION)}, got {interpolation!r}")
    f = DOWNSCALE_FACTOR[severity - 1]
    _, h, w, _ = frames.shape
    small = (max(1, round(w / f)), max(1, round(h / f)))
    flag = INTERPOLATION[interpolation]
    out = [cv2.resize(cv2.resize(fr, small, interpolation=flag), (w, h), interpolation=flag)
           for fr in frames.cpu().numpy()]
    return torch.from_numpy(np.stack(out)).to(frames.device)


def _disk(h: int, w: int, centre: tuple[float, float], radius: float) -> np.ndarray:
    """Boolean (H, W) mask of a filled disc rasterised as ``cv2.circle`` does (centre and radius in pixels)."""
    mask = np.zeros((h, w), np.uint8)
    lim = 4 * max(h, w)  # far-away discs: keep the coordinates in OpenCV's int range
    cx, cy = (int(np.clip(c, -lim, lim)) for c in centre)
    cv2.circle(mask, (cx, cy), max(0, int(radius)), 1, -1)
    return mask.astype(bool)


def sun_flare_map(h: int, w: int, radius: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """The per-video flare as a per-pixel affine map: (A (H, W), B (H, W, 3)) with y = A·x + B, x in 0..255.

    Draw order: line angle, centre x, centre y, ghost count, then per ghost alpha, position on the line, size
    exponent and colour. A ghost disc has radius k³, k ~ U{1, max(H // 100 - 2, 2)} (RandomSunFlare's rule).
    """
    angle = 2 * math.pi * rng.uniform(0.0, 1.0)
    x_min, y_min, x_max, y_max = FLARE_ROI
    cx, cy = int(w * rng.uniform(x_min, x_max)), int(h * rng.uniform(y_min, y_max))
    line_x = np.arange(0, w, 10)
    line_y = 2 * cy - (math.tan(angle) * (line_x - cx) + cy)
    a_out, b_out = np.ones((h, w)), np.zeros((h, w, 3))  # output = image
    a_ov, b_ov = a_out.copy(), b_out.copy()  # overlay = image; discs are painted onto it and accumulate

    def blend(alpha: float) -> None:
        nonlocal a_out, b_out
        a_out = alpha * a_ov + (1 - alpha) * a_out
        b_out = alpha * b_ov + (1 - alpha) * b_out

    for _ in range(int(rng.integers(FLARE_GHOSTS[0], FLARE_GHOSTS[1] + 1))):
        alpha = rng.uniform(*FLARE_GHOST_ALPHA)
        k = int(rng.integers(0, len(line_x)))
        size = int(rng.integers(1, max(h // 100 - 2, 2) + 1)) ** 3
        colour = rng.integers(205, 256, size=3)
        mask = _disk(h, w, (line_x[k], line_y[k]), size)
        a_ov[mask], b_ov[mask] = 0.0, colour
        blend(alpha)
    a_ov, b_ov = a_out.copy(), b_out.copy()  # the source is painted over the ghosted image
    steps = max(2, radius // 10)
    alphas, radii = np.linspace(0.0, 1.0, steps), np.linspace(1, radius, steps)
    for i in range(steps):
        mask = _disk(h, w, (cx, cy), radii[i])
        a_ov[mask], b_ov[mask] = 0.0, 255.0
        blend(alphas[steps - i - 1] ** 3)
    return a_out, b_out


@register_video_shift(
    "sun_flare", level="low",
    deviation="Albumentations' RandomSunFlare recipe composited in float (no uint8 rounding per disc), with a source "
              "radius relative to the frame and five severities of our own (Shirnin et al. give none)")
def sun_flare(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8; one lens flare (same place and ghosts) on every frame."""
    _, h, w, _ = frames.shape
    radius = max(1, round(SUN_FLARE_RADIUS[severity - 1] * max(h, w)))
    a, b = sun_flare_map(h, w, radius, numpy_rng(generator))
    a = torch.from_numpy(a.astype(np.float32)).to(frames.device)[None, :, :, None]
    b = torch.from_numpy(b.astype(np.float32)).to(frames.device)[None]
    return to_uint8((a * frames.to(torch.float32) + b) / 255.0)
