"""Low-level weather shifts of MLVP: fog and snow (docs/shifts/mlvp.md, App. E.1), one realisation per video.

Both take ImageNet-C's constants (Qiu et al.; Table 37, App. E.1/E.4) and act on the native-resolution frames.

* **fog**: one diamond-square plasma map F per video on a P×P grid, P = the next power of two >= max(H, W),
  cropped top-left to H×W; per frame y = trunc(255·clip((x + c·F)·μ/(μ + c), 0, 1)) with μ the frame's maximum.
* **snow**: one curtain per video, H + 3·(T-1) rows (3 px scroll per sampled frame), Gaussian canvas -> clipped zoom
  -> threshold -> uint8 -> motion blur along θ ~ U(-135°, -45°); frame i adds rows [3i, 3i + H) and their 180°
  rotation to the whitened frame. The curtain blur is ImageMagick's MotionBlur, as the reference code's Wand call:
  by default re-done in NumPy (:func:`motion_blur_imagemagick`, bit-identical, no system library), or the library
  itself (``blur_impl: wand``). ``snow_approx`` is ``imagecorruptions``' tap-sum approximation under its own name
  and ``snow``'s item seeds, so both draw the same curtain and differ only in the blur (docs/shifts/mlvp.md).
"""

from __future__ import annotations

import math

import numpy as np
import torch

from tta.shifts.registry import register_batched, register_video_shift
from tta.shifts.video.common import TRUNC_GUARD, numpy_rng, to_uint8, to_unit

FOG = ((1.5, 2.0), (2.0, 2.0), (2.5, 1.7), (2.5, 1.5), (3.0, 1.4))  # (c, wibble decay), docs/shifts/mlvp.md, App. E.1
# (loc, scale, zoom, threshold, radius, sigma, blend), docs/shifts/mlvp.md, App. E.1
SNOW = ((0.1, 0.3, 3.0, 0.5, 10, 4, 0.8), (0.2, 0.3, 2.0, 0.5, 12, 4, 0.7), (0.55, 0.3, 4.0, 0.9, 12, 8, 0.7),
        (0.55, 0.3, 4.5, 0.85, 12, 8, 0.65), (0.55, 0.3, 2.5, 0.85, 12, 12, 0.55))
SNOW_SCROLL = 3  # curtain rows per sampled frame, docs/shifts/mlvp.md, App. E.1


def plasma_fractal(size: int, decay: float, rng: np.random.Generator) -> np.ndarray:
    """Diamond-square plasma map (size × size, size a power of two) normalised to [0, 1] (docs/shifts/mlvp.md, App. E.1).

    Each pass fills the cell centres (square step), then the top-edge and left-edge midpoints (diamond step)
    from the mean of their four wrapped neighbours plus w·U(-w, w); w starts at 100 and is divided by ``decay``.
    """
    if size < 2 or size & (size - 1):
        raise ValueError(f"plasma map side must be a power of two >= 2, got {size}")
    f = np.zeros((size, size), dtype=np.float64)
    step, w = size, 100.0
    while step >= 2:
        half = step // 2
        corners = f[0::step, 0::step]
        four = corners + np.roll(corners, -1, axis=0)
        four = four + np.roll(four, -1, axis=1)
        f[half::step, half::step] = four / 4 + w * rng.uniform(-w, w, four.shape)
        centres, corners = f[half::step, half::step], f[0::step, 0::step]
        top = corners + np.roll(corners, -1, axis=1) + centres + np.roll(centres, 1, axis=0)
        f[0::step, half::step] = top / 4 + w * rng.uniform(-w, w, top.shape)
        left = corners + np.roll(corners, -1, axis=0) + centres + np.roll(centres, 1, axis=1)
        f[half::step, 0::step] = left / 4 + w * rng.uniform(-w, w, left.shape)
        step, w = half, w / decay
    f -= f.min()
    return f / f.max()


def _fog_map(h: int, w: int, decay: float, generator: torch.Generator) -> torch.Tensor:
    size = 1 << max(1, math.ceil(math.log2(max(h, w))))
    return torch.from_numpy(plasma_fractal(size, decay, numpy_rng(generator))[:h, :w].astype(np.float32))


def _fog_blend(frames: torch.Tensor, fmap: torch.Tensor, c: float) -> torch.Tensor:
    """uint8 (..., T, H, W, 3) frames and maps broadcast to (..., 1, H, W, 1) -> fogged uint8 frames.

    On the CPU one frame at a time with in-place float32 ops (the same operations in the same order, so the same
    bits; a frame's floats stay in cache, which makes it about twice as fast as whole-clip temporaries).
    """
    mu = frames.amax(dim=(-3, -2, -1), keepdim=True).to(torch.float32) / 255.0  # = max of x: division is monotone
    mu = torch.where(mu > 0, mu, torch.ones_like(mu))  # an all-black frame uses μ = 1 (docs/shifts/mlvp.md, App. E.1)
    cf = c * fmap
    if frames.is_cuda:
        return to_uint8((to_unit(frames) + cf) * mu / (mu + c))
    shape = frames.shape[-3:]
    out = torch.empty_like(frames)
    cfs = cf.expand(*frames.shape[:-3], *cf.shape[-3:]).reshape(-1, *cf.shape[-3:])
    for src, dst, m, f in zip(frames.reshape(-1, *shape), out.view(-1, *shape), mu.reshape(-1), cfs, strict=True):
        x = src.to(torch.float32).div_(255.0).add_(f).mul_(m).div_(m + c)
        dst.copy_(x.clamp_(0.0, 1.0).mul_(255.0).add_(TRUNC_GUARD).clamp_(max=255.0))
    return out


@register_video_shift("fog", level="low")
def fog(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3); one plasma map for all frames (docs/shifts/mlvp.md, App. E.1)."""
    c, decay = FOG[severity - 1]
    _, h, w, _ = frames.shape
    return _fog_blend(frames, _fog_map(h, w, decay, generator).to(frames.device)[None, :, :, None], c)


@register_batched("fog", exact=True)
def fog_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's plasma map from its own generator (= :func:`fog`)."""
    c, decay = FOG[severity - 1]
    h, w = frames.shape[2:4]
    maps = torch.stack([_fog_map(h, w, decay, g) for g in generators]).to(frames.device)
    return _fog_blend(frames, maps[:, None, :, :, None], c)


def clipped_zoom(img: np.ndarray, zoom: float) -> np.ndarray:
    """Centre crop of ceil(H/zoom) × ceil(W/zoom), upsampled by ``zoom`` (linear spline), centre-trimmed to H×W."""
    from scipy import ndimage  # loaded by the shifts that use it, not by every import of the registry
    h, w = img.shape[:2]
    ch, cw = math.ceil(h / zoom), math.ceil(w / zoom)
    top, left = (h - ch) // 2, (w - cw) // 2
    out = ndimage.zoom(img[top:top + ch, left:left + cw], zoom, order=1)
    t, l_ = (out.shape[0] - h) // 2, (out.shape[1] - w) // 2
    return out[t:t + h, l_:l_ + w]


def motion_blur_taps(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """Tap-sum motion blur of a 2-D image along ``angle`` degrees (``taps``, docs/shifts/mlvp.md, App. E.1; ImageMagick's kernel layout).

    w = 2·ceil(radius) + 1 taps with one-sided Gaussian weights exp(-i²/2σ²), normalised; tap i reads the image
    shifted by (-ceil(i·sinθ - 0.5), -ceil(i·cosθ - 0.5)) rows/columns with edge replication, stopping at the
    first shift that leaves the image.
    """
    width = 2 * math.ceil(radius) + 1
    weights = np.exp(-np.arange(width) ** 2 / (2.0 * sigma ** 2))
    weights /= weights.sum()
    h, w = img.shape
    src = img.astype(np.float64)
    out = np.zeros_like(src)
    s, c = math.sin(math.radians(angle)), math.cos(math.radians(angle))
    rows, cols = np.arange(h), np.arange(w)
    for i in range(width):
        dy, dx = -math.ceil(i * s - 0.5), -math.ceil(i * c - 0.5)
        if abs(dy) >= h or abs(dx) >= w:
            break
        out += weights[i] * src[np.clip(rows - dy, 0, h - 1)][:, np.clip(cols - dx, 0, w - 1)]
    return out


#: MagickSQ2PI of ImageMagick (magick/image-private.h), kept to the same digits so the kernel has the same bits
MAGICK_SQ2PI = 2.50662827463100024161235523934010416269302368164062


def motion_blur_imagemagick(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick 6's MotionBlurImage of a uint8 (H, W) image, quantised to 8 bits as the reference's PNG blob.

    The same arithmetic as magick/effect.c (Q16, non-HDRI): width = 2·ceil(radius) + 1 one-sided Gaussian weights
    exp(-i²/2σ²)/(√2π·σ), normalised; tap i reads the pixel at (x + ceil(i·cosθ - 0.5), y + ceil(i·sinθ - 0.5)),
    edge-replicated (the default virtual-pixel method); the taps are summed in double in order over the 16-bit
    values (8-bit · 257), rounded to the quantum (+0.5, clamped), and the 16-bit result is floor-divided by 257.
    Bit-identical to the Wand call (:func:`_motion_blur_wand`) on snow curtains of every severity and on random
    images at any angle (``tests/shifts/video/test_shift_video_stats.py``), without the system library.
    """
    width = 2 * math.ceil(radius) + 1
    s = max(abs(sigma), 1e-12)  # MagickSigma
    kernel = np.array([math.exp(-(i * i) / (2.0 * s * s)) / (MAGICK_SQ2PI * s) for i in range(width)])
    kernel = kernel / kernel.sum()
    px, py = width * math.sin(math.radians(angle)), width * math.cos(math.radians(angle))
    hyp = math.hypot(px, py)
    offsets = [(math.ceil(i * py / hyp - 0.5), math.ceil(i * px / hyp - 0.5)) for i in range(width)]  # (x, y)
    h, w = img.shape
    r = max(max(abs(ox), abs(oy)) for ox, oy in offsets)
    padded = np.pad(np.asarray(img, np.uint8), r, mode="edge").astype(np.float64) * 257.0
    out = np.zeros((h, w))
    for k, (ox, oy) in zip(kernel, offsets, strict=True):
        out += k * padded[r + oy:r + oy + h, r + ox:r + ox + w]
    quantum = np.floor(np.clip(out, 0.0, 65535.0) + 0.5)
    return np.floor(quantum / 257.0)


def _motion_blur_wand(img: np.ndarray, radius: float, sigma: float, angle: float) -> np.ndarray:
    """ImageMagick's MotionBlur of a uint8 (H, W) image through Wand, quantised to 8 bits as the reference's PNG blob.

    Raw grey pixels in and 16-bit raw grey out, floor(q / 257): the same 8-bit values as the reference's PNG
    round trip (checked on curtains of every severity; PNG compression was a third of the cost).
    """
    from wand.image import Image as WandImage
    from wand.resource import limits

    # one ImageMagick thread: no OpenMP team of ImageMagick's survives in the libgomp it shares with torch (a
    # process forked afterwards could hang in it); the blur is per pixel, so the result does not change
    if limits["thread"] != 1:
        limits["thread"] = 1
    h, w = img.shape
    with WandImage(blob=np.ascontiguousarray(img, np.uint8).tobytes(), format="gray", width=w, height=h,
                   depth=8) as im:
        im.motion_blur(radius=radius, sigma=sigma, angle=angle)
        im.depth = 16
        q = np.frombuffer(im.make_blob("gray"), "<u2").reshape(h, w)
    return (q // 257).astype(np.float64)


def wand_available() -> bool:
    """True when Wand imports and finds libMagickWand (ImageMagick's MotionBlur can run)."""
    try:
        import wand.image  # noqa: F401
    except ImportError:  # Wand missing, or present without libmagickwand
        return False
    return True


IMAGEMAGICK_MISSING = ("snow blur_impl=wand calls ImageMagick through Wand: install Wand and libmagickwand (`make "
                       "setup` as root, or `apt-get install libmagickwand-6.q16-6 && pip install 'tta[video]'`), or "
                       "use the default blur_impl=imagemagick (the same pixels without the library)")
SNOW_BLURS = ("imagemagick", "wand")  # the two implementations of the reference blur that ``snow`` accepts


def _blur_impl(name: str) -> str:
    """The blur that ``blur_impl`` resolves to: ``imagemagick`` (NumPy, bit-identical to the library), ``wand``
    (the library call) or ``taps`` (``snow_approx``); ``auto`` is ``imagemagick`` (kept for old manifests)."""
    if name in ("imagemagick", "auto"):
        return "imagemagick"
    if name == "wand":
        if not wand_available():
            raise ImportError(IMAGEMAGICK_MISSING)
        return "wand"
    if name == "taps":
        return "taps"
    raise ValueError(f"snow blur_impl must be imagemagick, wand or taps, got {name!r}")


def snow_curtain(h: int, w: int, t: int, severity: int, rng: np.random.Generator,
                 blur_impl: str = "imagemagick") -> np.ndarray:
    """The per-video snow curtain, float (H + 3·(T-1), W) in [0, 1] (docs/shifts/mlvp.md, App. E.1)."""
    loc, scale, zoom, thr, radius, sigma, _ = SNOW[severity - 1]
    hc = h + SNOW_SCROLL * max(t - 1, 0)
    canvas = rng.normal(loc, scale, (hc, w))
    canvas = clipped_zoom(canvas, zoom)
    canvas[canvas < thr] = 0
    layer = (255.0 * np.clip(canvas, 0, 1)).astype(np.uint8)
    angle = rng.uniform(-135.0, -45.0)
    impl = _blur_impl(blur_impl)
    if impl == "imagemagick":
        blurred = motion_blur_imagemagick(layer, radius, sigma, angle)
    elif impl == "wand":
        blurred = _motion_blur_wand(layer, radius, sigma, angle)
    else:
        blurred = np.clip(np.floor(motion_blur_taps(layer, radius, sigma, angle) + 1e-9), 0, 255)  # trunc, as the blob
    return blurred / 255.0


def _check_snow_blur(name: str, blur_impl: str) -> None:
    """``snow`` blurs with ImageMagick's algorithm only and ``snow_approx`` with taps only, so no run is mislabelled."""
    if name == "snow" and blur_impl not in SNOW_BLURS:
        raise ValueError(f"shift 'snow' always blurs with ImageMagick's MotionBlur (blur_impl imagemagick or wand, got "
                         f"{blur_impl!r}); the tap-sum approximation is its own shift: shift=snow_approx")
    if name == "snow" and blur_impl == "wand" and not wand_available():
        raise ImportError(IMAGEMAGICK_MISSING)
    if name == "snow_approx" and blur_impl != "taps":
        raise ValueError(f"snow_approx blurs with taps only (got blur_impl={blur_impl!r}); for ImageMagick use "
                         "shift=snow")


def _snow_record(options: dict, resources: dict) -> dict:
    """The record names the MotionBlur that ran (bit-identical NumPy port, or the library's version)."""
    blur = options.get("blur_impl", "imagemagick")
    _check_snow_blur("snow", blur)
    if blur == "imagemagick":
        return {"options": {"imagemagick_version": "ImageMagick 6 Q16 MotionBlurImage, NumPy (bit-identical to the "
                                                   "library)"}}
    from wand.version import MAGICK_VERSION

    return {"options": {"imagemagick_version": MAGICK_VERSION}}


def _snow_layers(t: int, h: int, w: int, severity: int, generator: torch.Generator, blur_impl: str) -> torch.Tensor:
    """float32 (T, H, W, 1) on the CPU: the curtain rows [3i, 3i + H) of frame i plus their 180° rotation."""
    curtain = torch.from_numpy(snow_curtain(h, w, t, severity, numpy_rng(generator), blur_impl).astype(np.float32))
    rows = torch.arange(t)[:, None] * SNOW_SCROLL + torch.arange(h)[None, :]
    layers = curtain[rows]  # (T, H, W): S_i = rows [3i, 3i + H)
    return (layers + torch.flip(layers, dims=(1, 2)))[..., None]  # + rot180(S_i)


def _snow_all(frames: torch.Tensor, layers: torch.Tensor, severity: int) -> torch.Tensor:
    """uint8 (..., H, W, 3) frames and their layers (..., H, W, 1) -> snowy frames; on the CPU one frame at a time
    in NumPy (:func:`_snow_blend_numpy`, the same bits), on CUDA all at once."""
    blend = SNOW[severity - 1][6]
    if frames.is_cuda:
        weights = torch.tensor([0.299, 0.587, 0.114], device=frames.device)
        return _snow_blend(frames, layers.to(frames.device), weights, blend)
    shape = frames.shape[-3:]
    src = frames.reshape(-1, *shape).numpy()
    out = np.empty_like(src)
    for f, dst, layer in zip(src, out, layers.reshape(-1, *shape[:2], 1).numpy(), strict=True):
        _snow_blend_numpy(f, layer, blend, dst)
    return torch.from_numpy(out).reshape(frames.shape)


SNOW_GREY = np.array([0.299, 0.587, 0.114], np.float32)


def _snow_blend_numpy(frame: np.ndarray, layer: np.ndarray, blend: float, out: np.ndarray) -> None:
    """:func:`_snow_blend` of one uint8 (H, W, 3) frame into ``out``, bit for bit, in place in float32.

    The same float32 operations in the same order (the grey sum as w0·r + w1·g + w2·b, torch's order); two steps
    of the torch code are dropped because they cannot change a value here: the clip at 0 (frame, layer >= 0) and
    the clamp at 255 (255 + the guard truncates to 255). ``tests/shifts/video/test_shift_fast_paths.py`` compares.
    """
    x = np.divide(frame, np.float32(255.0), dtype=np.float32)
    grey = x[..., 0] * SNOW_GREY[0]
    grey += x[..., 1] * SNOW_GREY[1]
    grey += x[..., 2] * SNOW_GREY[2]
    grey *= np.float32(1.5)
    grey += np.float32(0.5)
    whiter = np.maximum(x, grey[..., None])
    whiter *= np.float32(1 - blend)
    x *= np.float32(blend)
    x += whiter
    x += layer
    np.minimum(x, np.float32(1.0), out=x)
    x *= np.float32(255.0)
    x += np.float32(TRUNC_GUARD)
    np.copyto(out, x, casting="unsafe")  # truncation, as .to(torch.uint8)


def _snow(frames: torch.Tensor, severity: int, generator: torch.Generator, blur_impl: str) -> torch.Tensor:
    t, h, w, _ = frames.shape
    return _snow_all(frames, _snow_layers(t, h, w, severity, generator, blur_impl), severity)


def _snow_batch(frames: torch.Tensor, severity: int, generators, blur_impl: str) -> torch.Tensor:
    _, t, h, w, _ = frames.shape
    layers = torch.stack([_snow_layers(t, h, w, severity, g, blur_impl) for g in generators])
    return _snow_all(frames, layers, severity)


def _snow_blend(frames: torch.Tensor, layers: torch.Tensor, weights: torch.Tensor, blend: float) -> torch.Tensor:
    """uint8 frames (..., H, W, 3), snow layers (..., H, W, 1) -> whitened frames plus snow, uint8."""
    x = to_unit(frames)
    grey = (x * weights).sum(-1, keepdim=True)
    x = blend * x + (1 - blend) * torch.maximum(x, 1.5 * grey + 0.5)
    return to_uint8(x + layers)


@register_video_shift("snow", level="low", record=_snow_record)
def snow(frames: torch.Tensor, severity: int, generator: torch.Generator, blur_impl: str = "imagemagick"
         ) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3); the curtain scrolls 3 px per frame (docs/shifts/mlvp.md, App. E.1).

    The curtain is blurred by ImageMagick's MotionBlur (the reference): ``blur_impl`` = ``imagemagick`` (default, its
    arithmetic in NumPy, bit-identical) or ``wand`` (the library call); ``taps``/``auto`` under the name ``snow``
    fail instead of mislabelling a run.
    """
    _check_snow_blur("snow", blur_impl)
    return _snow(frames, severity, generator, blur_impl)


@register_video_shift(
    "snow_approx", level="low", seed_as="snow", approximates="snow",
    note="the snow curtain is motion-blurred by the tap-sum approximation of imagecorruptions instead of "
         "ImageMagick's MotionBlur (same curtain and angle as snow; <= 1 grey level apart)")
def snow_approx(frames: torch.Tensor, severity: int, generator: torch.Generator, blur_impl: str = "taps"
                ) -> torch.Tensor:
    """``snow`` with the curtain blurred by the tap-sum approximation (``taps``, docs/shifts/mlvp.md, App. E.1) instead of ImageMagick."""
    _check_snow_blur("snow_approx", blur_impl)
    return _snow(frames, severity, generator, "taps")


@register_batched("snow", exact=True)
def snow_batch(frames: torch.Tensor, severity: int, generators, blur_impl: str = "imagemagick") -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's curtain from its own generator (= :func:`snow`)."""
    _check_snow_blur("snow", blur_impl)
    return _snow_batch(frames, severity, generators, blur_impl)


@register_batched("snow_approx", exact=True)
def snow_approx_batch(frames: torch.Tensor, severity: int, generators, blur_impl: str = "taps") -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's curtain from its own generator (= :func:`snow_approx`)."""
    _check_snow_blur("snow_approx", blur_impl)
    return _snow_batch(frames, severity, generators, "taps")
