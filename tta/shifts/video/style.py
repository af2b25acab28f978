"""High-level shift of MLVP: style transfer (docs/shifts/mlvp.md, App. E.3) and its weight-free approximation (offline substitutes).

α_s = 0.2, 0.4, 0.6, 0.8, 1.0 (Table 37); **one style image per video** for all frames (temporal consistency).

* ``style_transfer``: full AdaIN (:mod:`tta.shifts.video.adain`) with the encoder/decoder weights in
  ``weights_dir`` (``vgg_normalised.pth``, ``decoder.pth``); per frame t = α·AdaIN(E(x), E(s)) + (1-α)·E(x),
  y = trunc(255·clip(D(t), 0, 1)). D's output (8·⌈H/8⌉ rows) is cropped back to H×W.
* ``style_transfer_approx`` (``shift=style_transfer_approx``; ``shift=style_transfer`` is AdaIN and stops with one
  line naming ``shift.options.weights_dir`` when it has no weights): per-channel mean/std matching of each frame to the style image **in CIE Lab**, blended with the frame by
  the same α: t = α·(σ_s (x - μ_c)/σ_c + μ_s) + (1-α)·x. It is a different, much weaker operator than AdaIN (it
  moves colour statistics only, no texture) and is therefore reported under its own name, never as
  ``style_transfer`` (docs/shifts/mlvp.md, offline substitutes). The optional Laplacian-band variant is not implemented.

Style images: ``style_dir`` (all png/jpg/jpeg files below it, sorted; one drawn uniformly per video with the
item's Python ``random``; RGB, short side resized to 512 bilinear, [0, 1]; an unreadable file is replaced by the
first one) or, when ``style_dir`` is null, a procedurally generated "painting" per video (a random palette mapped
through multi-octave noise and oriented strokes) drawn from the item's NumPy generator. An empty ``style_dir``
is an error; ``allow_passthrough=true`` reproduces the code's silent clean copy instead.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import cv2
import numpy as np
import torch

from tta.shifts.registry import register_check, register_video_shift
from tta.shifts.video.common import numpy_rng, python_rng, to_uint8, to_unit

log = logging.getLogger(__name__)

STYLE_ALPHA = (0.2, 0.4, 0.6, 0.8, 1.0)
STYLE_SHORT_SIDE = 512
_EXT = (".png", ".jpg", ".jpeg")
ADAIN_MISSING = ("style_transfer (AdaIN) needs shift.options.weights_dir, a directory with vgg_normalised.pth and "
                 "decoder.pth (naoto0804/pytorch-AdaIN); without weights run the approximation "
                 "shift=style_transfer_approx")
_NETS: dict = {}
_FILES: dict = {}

# sRGB (D65) <-> XYZ, OpenCV's constants
_M = torch.tensor([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169], [0.019334, 0.119193, 0.950227]])
_WHITE = torch.tensor([0.950456, 1.0, 1.088754])


def rgb_to_lab(x: torch.Tensor) -> torch.Tensor:
    """(..., 3) RGB in [0, 1] -> CIE Lab (L in [0, 100])."""
    lin = torch.where(x <= 0.04045, x / 12.92, ((x + 0.055) / 1.055) ** 2.4)
    xyz = lin @ _M.to(x).t() / _WHITE.to(x)
    f = torch.where(xyz > 0.008856, xyz.clamp(min=1e-12) ** (1 / 3), 7.787 * xyz + 16 / 116)
    return torch.stack([116 * f[..., 1] - 16, 500 * (f[..., 0] - f[..., 1]), 200 * (f[..., 1] - f[..., 2])], -1)


def lab_to_rgb(lab: torch.Tensor) -> torch.Tensor:
    """Inverse of :func:`rgb_to_lab` (unclipped)."""
    fy = (lab[..., 0] + 16) / 116
    f = torch.stack([fy + lab[..., 1] / 500, fy, fy - lab[..., 2] / 200], -1)
    xyz = torch.where(f > 0.206893, f ** 3, (f - 16 / 116) / 7.787) * _WHITE.to(lab)
    lin = (xyz @ torch.linalg.inv(_M).to(lab).t()).clamp(min=0)
    return torch.where(lin <= 0.0031308, 12.92 * lin, 1.055 * lin ** (1 / 2.4) - 0.055)


def procedural_style(rng: np.random.Generator, size: int = 256) -> np.ndarray:
    """A random "painting", uint8 (size, size, 3): palette of 3-6 colours over noise and oriented strokes."""
    k = int(rng.integers(3, 7))
    hsv = np.stack([rng.uniform(0, 180, k), rng.uniform(100, 255, k), rng.uniform(50, 255, k)], -1)
    palette = cv2.cvtColor(hsv.astype(np.uint8)[None], cv2.COLOR_HSV2RGB)[0].astype(np.float32)
    field = np.zeros((size, size), np.float32)
    for octave, amp in ((4, 1.0), (8, 0.5), (16, 0.25), (32, 0.125)):
        field += amp * cv2.resize(rng.random((octave, octave)).astype(np.float32), (size, size),
                                  interpolation=cv2.INTER_CUBIC)
    phi, freq = rng.uniform(0, np.pi), rng.uniform(6, 24)
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
    strokes = np.sin(2 * np.pi * freq * (xx * np.cos(phi) + yy * np.sin(phi)) + 6 * field)
    level = (field - field.min()) / (np.ptp(field) + 1e-8) * k + 0.35 * strokes
    img = palette[np.clip(level.astype(np.int64), 0, k - 1)]
    img = cv2.GaussianBlur(img, (0, 0), 1.5) + rng.normal(0, 8, img.shape).astype(np.float32)
    return np.clip(img, 0, 255).astype(np.uint8)


def _style_files(style_dir: str) -> list[Path]:
    if style_dir not in _FILES:
        _FILES[style_dir] = sorted(p for p in Path(style_dir).rglob("*") if p.suffix.lower() in _EXT)
    return _FILES[style_dir]


def _load_style(path: Path, fallback: Path) -> np.ndarray:
    img = cv2.imread(os.fspath(path), cv2.IMREAD_COLOR)
    if img is None:
        log.warning("style image %s is unreadable; using %s", path, fallback)
        img = cv2.imread(os.fspath(fallback), cv2.IMREAD_COLOR)
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    h, w = img.shape[:2]
    s = STYLE_SHORT_SIDE / min(h, w)
    return cv2.resize(img, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_LINEAR)


def pick_style(generator: torch.Generator, style_dir: str | None) -> np.ndarray | None:
    """The video's style image, uint8 (h, w, 3); ``None`` when ``style_dir`` holds no image."""
    py, nrng = python_rng(generator), numpy_rng(generator)
    if not style_dir:
        return procedural_style(nrng)
    files = _style_files(style_dir)
    if not files:
        return None
    return _load_style(files[py.randrange(len(files))], files[0])


def lab_transfer(frames: torch.Tensor, style: np.ndarray, alpha: float) -> torch.Tensor:
    """Offline substitute (docs/shifts/mlvp.md): per-frame Lab mean/std matching to ``style`` blended by α; uint8 (T, H, W, 3) -> uint8."""
    lab = rgb_to_lab(to_unit(frames))
    s = rgb_to_lab(torch.from_numpy(style).to(frames.device).float() / 255.0).reshape(-1, 3)
    ms, ss = s.mean(0), (s.var(0, unbiased=True) + 1e-5).sqrt()
    flat = lab.flatten(1, 2)
    mc, sc = flat.mean(1)[:, None, None], (flat.var(1, unbiased=True) + 1e-5).sqrt()[:, None, None]
    t = alpha * (ss * (lab - mc) / sc + ms) + (1 - alpha) * lab
    return to_uint8(lab_to_rgb(t))


def _style_or_passthrough(generator, style_dir, allow_passthrough):
    style = pick_style(generator, style_dir)
    if style is None and not allow_passthrough:
        raise FileNotFoundError(f"style_dir {style_dir!r} holds no png/jpg/jpeg image. Point shift.options.style_dir "
                                "at style images (the README uses Painter-by-Numbers train), set it to null for "
                                "procedural styles, or set allow_passthrough=true for the code's silent clean copy.")
    return style


@register_video_shift(
    "style_transfer_approx", level="high", approximates="style_transfer",
    note="per-channel Lab mean/std transfer of a style image blended by alpha (spec/mlvp.md 5.3), not AdaIN: it "
         "moves colour statistics only, no texture",
    record=lambda options, resources: {"options": {"style_source": options.get("style_dir") or "procedural"}})
def style_transfer_approx(frames: torch.Tensor, severity: int, generator: torch.Generator, style_dir: str | None = None,
                          allow_passthrough: bool = False, weights_dir: str | None = None) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3); Lab statistics transfer (docs/shifts/mlvp.md, offline substitutes), NOT AdaIN.

    ``weights_dir`` is accepted (and ignored) so one option set serves both style shifts.
    """
    style = _style_or_passthrough(generator, style_dir, allow_passthrough)
    return frames.clone() if style is None else lab_transfer(frames, style, STYLE_ALPHA[severity - 1])


@register_check("style_transfer")
def _check_weights(options: dict) -> None:
    from tta.shifts.video.adain import check_weights

    if not options.get("weights_dir"):
        raise ValueError(ADAIN_MISSING)
    check_weights(options["weights_dir"])


@register_video_shift("style_transfer", level="high")
def style_transfer(frames: torch.Tensor, severity: int, generator: torch.Generator, weights_dir: str | None = None,
                   style_dir: str | None = None, allow_passthrough: bool = False) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3); full AdaIN with the weights in ``weights_dir`` (docs/shifts/mlvp.md, App. E.3)."""
    from tta.shifts.video.adain import load_adain, stylise

    if not weights_dir:
        raise ValueError(ADAIN_MISSING)
    style = _style_or_passthrough(generator, style_dir, allow_passthrough)
    if style is None:
        return frames.clone()
    key = (os.fspath(weights_dir), str(frames.device))
    if key not in _NETS:
        _NETS[key] = load_adain(weights_dir, frames.device)
    enc, dec = _NETS[key]
    _, h, w, _ = frames.shape
    x = to_unit(frames).permute(0, 3, 1, 2)
    s = torch.from_numpy(style).to(frames.device).float().permute(2, 0, 1)[None] / 255.0
    y = stylise(x, s, STYLE_ALPHA[severity - 1], enc, dec)[:, :, :h, :w]
    return to_uint8(y.permute(0, 2, 3, 1))
