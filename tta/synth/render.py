"""Renderers of the embedded benchmark: a :class:`~tta.synth.scene.Scene` becomes uint8 RGB frames.

Two styles, one per domain:

* ``a`` (``data=synth``): natural-looking procedural textures (multi-octave value noise through a palette,
  wood grain, waves, clouds, stars), solid anti-aliased objects with a dark rim and soft shading, 128×96 px;
* ``b`` (``data=synth_b``): flat geometric backdrops (checkerboard, stripes, dots, gradient, grid), pastel
  objects with thick outlines and hatched fill, a hand-held camera shake, 112×112 px.

Both are textured (never flat) so that noise, blur and compression really destroy information, and both return
the exact per-frame bounding box of the main object, written to the main-objects metadata (docs/shifts/mlvp.md,
"Main-object metadata") that the occlusion shift reads.
"""

from __future__ import annotations

import cv2
import numpy as np

from tta.synth.scene import ObjectSpec, Scene
from tta.synth.vocab import BACKGROUNDS_A, BACKGROUNDS_B, COLOURS, SIZES

STYLE_GEOMETRY = {"a": dict(width=128, height=96, frames=32, fps=8), "b": dict(width=112, height=112, frames=24, fps=6)}


def _value_noise(rng: np.random.Generator, h: int, w: int, octaves=(4, 8, 16, 32), decay=0.55) -> np.ndarray:
    """Multi-octave value noise in [0, 1], shape (h, w)."""
    out = np.zeros((h, w), np.float32)
    amp, total = 1.0, 0.0
    for cells in octaves:
        grid = rng.random((max(2, cells * h // w), cells)).astype(np.float32)
        out += amp * cv2.resize(grid, (w, h), interpolation=cv2.INTER_CUBIC)
        total += amp
        amp *= decay
    out /= total
    out -= out.min()
    return out / max(float(out.max()), 1e-6)


def _palette(t: np.ndarray, anchors) -> np.ndarray:
    """Map t in [0,1] (h, w) through piecewise-linear anchor colours -> float32 (h, w, 3) in [0, 255]."""
    anchors = np.asarray(anchors, np.float32)
    pos = t * (len(anchors) - 1)
    lo = np.clip(np.floor(pos).astype(int), 0, len(anchors) - 2)
    frac = (pos - lo)[..., None]
    return anchors[lo] * (1 - frac) + anchors[lo + 1] * frac


def background(scene: Scene, h: int, w: int) -> np.ndarray:
    """Static background of a scene, float32 (h, w, 3) in [0, 255]."""
    rng = np.random.default_rng(scene.bg_seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    if scene.style == "a":
        anchors = BACKGROUNDS_A[scene.background][0]
        n = _value_noise(rng, h, w)
        if scene.background == "wood":
            n = 0.5 + 0.5 * np.sin(yy / 3.0 + 6.0 * n)
        elif scene.background == "water":
            n = 0.5 + 0.5 * np.sin(yy / 2.5 + 0.15 * xx + 4.0 * n)
        elif scene.background == "sky":
            n = np.clip(1.4 * n - 0.2, 0, 1)
        img = _palette(n, anchors)
        if scene.background == "night":
            stars = rng.random((h, w)) > 0.985
            img[stars] = 230.0
        grain = rng.normal(0, 6.0, (h, w, 1)).astype(np.float32)
        return np.clip(img + grain, 0, 255)
    c0, c1 = (np.asarray(c, np.float32) for c in BACKGROUNDS_B[scene.background][0])
    period = float(rng.integers(8, 16))
    if scene.background == "checker":
        m = ((xx // period + yy // period) % 2).astype(np.float32)
    elif scene.background == "stripes":
        m = (np.sin((xx + yy * rng.uniform(-1, 1)) * np.pi / period) > 0).astype(np.float32)
    elif scene.background == "dots":
        m = (((xx % period) - period / 2) ** 2 + ((yy % period) - period / 2) ** 2 < (period / 3.5) ** 2).astype(np.float32)
    elif scene.background == "gradient":
        m = (xx / w * 0.6 + yy / h * 0.4) + 0.15 * _value_noise(rng, h, w, octaves=(4, 8))
    else:  # grid
        m = (((xx % period) < 1.5) | ((yy % period) < 1.5)).astype(np.float32)
    img = c0 * (1 - m[..., None]) + c1 * m[..., None]
    return np.clip(img + rng.normal(0, 4.0, (h, w, 1)).astype(np.float32), 0, 255)


def _trajectory(obj: ObjectSpec, u: float) -> tuple[float, float]:
    """Centre (x, y) as fractions of the frame at clip time u in [0, 1]."""
    if obj.event == "reverse" and u > obj.event_time:
        u = obj.event_time - (u - obj.event_time)
    elif obj.event == "stop" and u > obj.event_time:
        u = obj.event_time
    s = obj.speed
    cx, cy = 0.5 + 0.3 * (obj.x0 - 0.5), 0.5 + 0.3 * (obj.y0 - 0.5)
    m = obj.motion
    if m == "left":
        return cx + s * (0.5 - u), cy
    if m == "right":
        return cx + s * (u - 0.5), cy
    if m == "up":
        return cx, cy + s * (0.5 - u) * 0.9
    if m == "down":
        return cx, cy + s * (u - 0.5) * 0.9
    if m == "diagonal":
        sign = 1.0 if obj.phase < np.pi else -1.0
        return cx + sign * s * (u - 0.5) * 0.8, cy + s * (u - 0.5) * 0.7
    if m == "zigzag":
        tri = 2 * abs(2 * ((2 * u + obj.phase / np.pi) % 1.0) - 1) - 1
        sign = 1.0 if obj.phase < np.pi else -1.0
        return cx + sign * s * (u - 0.5), cy + 0.15 * tri
    if m == "circle":
        a = 2 * np.pi * u + obj.phase
        return cx + 0.2 * np.cos(a), cy + 0.22 * np.sin(a)
    if m == "bounce":
        return cx + 0.05 * np.sin(obj.phase), cy + 0.2 - 0.4 * abs(np.sin(3 * np.pi * u + obj.phase))
    return cx, cy  # still


def _scale(obj: ObjectSpec, u: float) -> float:
    if obj.event in ("grow", "shrink") and u > obj.event_time:
        k = (u - obj.event_time) / max(1e-6, 1 - obj.event_time)
        return 1 + 0.7 * k if obj.event == "grow" else 1 - 0.5 * k
    return 1.0


def _visible(obj: ObjectSpec, u: float) -> bool:
    if obj.event == "appear":
        return u >= obj.event_time
    if obj.event == "disappear":
        return u < obj.event_time
    return True


def main_visible(scene: Scene, u: float) -> bool:
    """Whether the main object is on screen at clip time u in [0, 1]."""
    return _visible(scene.objects[0], u)


def _polygon(shape: str, x: float, y: float, r: float) -> list[np.ndarray]:
    if shape == "triangle":
        ang = np.deg2rad([-90, 30, 150])
        return [np.stack([x + r * np.cos(ang), y + r * np.sin(ang) * 1.05 + r * 0.1], 1)]
    if shape == "diamond":
        return [np.array([[x, y - r], [x + 0.75 * r, y], [x, y + r], [x - 0.75 * r, y]])]
    if shape == "star":
        ang = np.deg2rad(np.arange(10) * 36 - 90)
        rad = np.where(np.arange(10) % 2 == 0, r, 0.45 * r)
        return [np.stack([x + rad * np.cos(ang), y + rad * np.sin(ang)], 1)]
    if shape == "square":
        q = 0.8 * r
        return [np.array([[x - q, y - q], [x + q, y - q], [x + q, y + q], [x - q, y + q]])]
    if shape == "bar":
        return [np.array([[x - r, y - 0.3 * r], [x + r, y - 0.3 * r], [x + r, y + 0.3 * r], [x - r, y + 0.3 * r]])]
    if shape == "cross":
        t = 0.33 * r
        return [np.array([[x - r, y - t], [x + r, y - t], [x + r, y + t], [x - r, y + t]]),
                np.array([[x - t, y - r], [x + t, y - r], [x + t, y + r], [x - t, y + r]])]
    raise ValueError(shape)


def _draw_mask(shape: str, x: float, y: float, r: float, h: int, w: int) -> tuple[np.ndarray, int, int]:
    """Anti-aliased coverage of one shape in a window around it (1/16-pixel vertex precision via cv2 ``shift``).

    Returns:
        (cover, x0, y0): float32 (hh, ww) coverage in [0, 1] of the window whose top-left pixel is (x0, y0).
    """
    pad = int(np.ceil(r * 1.2)) + 3
    x0, y0 = max(0, int(x) - pad), max(0, int(y) - pad)
    x1, y1 = min(w, int(x) + pad + 1), min(h, int(y) + pad + 1)
    if x1 <= x0 or y1 <= y0:
        return np.zeros((0, 0), np.float32), x0, y0
    mask = np.zeros((y1 - y0, x1 - x0), np.uint8)
    lx, ly = x - x0, y - y0
    sh = 4
    k = 1 << sh
    if shape == "circle":
        cv2.circle(mask, (int(lx * k), int(ly * k)), int(r * k), 255, -1, cv2.LINE_AA, sh)
    elif shape == "ring":
        cv2.circle(mask, (int(lx * k), int(ly * k)), int(r * 0.8 * k), 255, max(2, int(r * 0.35)), cv2.LINE_AA, sh)
    else:
        pts = [np.round(p * k).astype(np.int32) for p in _polygon(shape, lx, ly, r)]
        cv2.fillPoly(mask, pts, 255, cv2.LINE_AA, sh)
    return mask.astype(np.float32) / 255.0, x0, y0


def render(scene: Scene, only: list[int] | None = None) -> tuple[np.ndarray, list[list[float] | None]]:
    """Render a scene (all frames, or only the frame indices in ``only``, in that order).

    Returns:
        frames: uint8 (T, H, W, 3) RGB.
        boxes: per frame, the main object's box ``[x1, y1, x2, y2]`` in native pixels, or None when invisible.
    """
    g = STYLE_GEOMETRY[scene.style]
    h, w, t_len = g["height"], g["width"], g["frames"]
    bg = background(scene, h, w)
    unit = min(h, w) / 96.0
    wanted = list(range(t_len)) if only is None else list(only)
    frames = np.empty((len(wanted), h, w, 3), np.uint8)
    boxes: list[list[float] | None] = []
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    for out_i, t in enumerate(wanted):
        u = t / (t_len - 1)
        img = bg.copy()
        box = None
        # distractors first, main object last (on top)
        for idx in reversed(range(len(scene.objects))):
            obj = scene.objects[idx]
            if not _visible(obj, u):
                continue
            fx, fy = _trajectory(obj, u)
            x, y = fx * w, fy * h
            r = SIZES[obj.size][0] * unit * _scale(obj, u)
            colour_name = obj.event_colour if (obj.event == "recolour" and u >= obj.event_time) else obj.colour
            rgb = np.asarray(COLOURS[colour_name][0], np.float32)
            cover, x0, y0 = _draw_mask(obj.shape, x, y, r, h, w)
            if cover.size == 0:
                continue
            hh, ww = cover.shape
            wy, wx = yy[y0:y0 + hh, x0:x0 + ww], xx[y0:y0 + hh, x0:x0 + ww]
            if scene.style == "a":
                shade = 1.0 - 0.25 * np.clip(((wx - x) + (wy - y)) / (2 * r + 1e-6), -1, 1)
                fill = rgb * shade[..., None]
                rim = np.clip(cover * 4.0, 0, 1) - np.clip((cover - 0.75) * 4.0, 0, 1)
                fill = fill * (1 - 0.5 * rim[..., None])
            else:
                pastel = 0.65 * rgb + 0.35 * 255.0
                hatch = ((wx - wy) % 5 < 1.5).astype(np.float32)[..., None]
                fill = pastel * (1 - 0.35 * hatch)
                outline = np.clip(cover * 3.0, 0, 1) - np.clip((cover - 0.66) * 3.0, 0, 1)
                fill = fill * (1 - 0.85 * outline[..., None])
            win = img[y0:y0 + hh, x0:x0 + ww]
            img[y0:y0 + hh, x0:x0 + ww] = win * (1 - cover[..., None]) + fill * cover[..., None]
            if idx == 0:
                ys, xs = np.nonzero(cover > 0.25)
                if len(xs):
                    box = [float(xs.min() + x0), float(ys.min() + y0), float(xs.max() + 1 + x0), float(ys.max() + 1 + y0)]
        if scene.style == "b":
            dx, dy = (int(v) for v in np.random.default_rng([scene.bg_seed, t]).integers(-2, 3, size=2))
            img = np.roll(img, (dy, dx), axis=(0, 1))
            if box is not None:
                box = [min(max(box[0] + dx, 0), w), min(max(box[1] + dy, 0), h),
                       min(max(box[2] + dx, 0), w), min(max(box[3] + dy, 0), h)]
        frames[out_i] = np.clip(img, 0, 255).astype(np.uint8)
        boxes.append(box)
    return frames, boxes
