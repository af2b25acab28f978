"""Mid-level shift of MLVP: main-object occlusion (docs/shifts/mlvp.md, App. E.2), boxes from the main-objects JSON (main-object metadata).

Area ratio ρ_s of the main object's **box** (not of the frame): the code's linspace 0.3-0.8 (0.30, 0.425, 0.55,
0.675, 0.80; default) or Table 37's 0.30, 0.40, 0.50, 0.60, 0.80 (``area_table: paper``). For each sampled frame,
keyed by its original frame index as a string (``context.frame_indices``):

1. non-empty ranked list: take the top entry's box, int and clipped to the frame; if bw, bh > 0 the patch is
   w = ⌊bw·√ρ⌋ by h = ⌊bh·√ρ⌋ at x0 ~ U{x1 .. max(x1+1, x2-w) - 1}, then y0 likewise, independently per frame;
   a degenerate box occludes nothing and keeps the previous patch;
2. empty list after an occluded frame: the previous patch shifted by (dx, dy), each uniform on -5..5;
3. empty list and nothing before: a centred patch with w ~ U{W/8 .. W/4), h ~ U{H/8 .. H/4) (ignores severity);
4. the patch is clipped and filled black with inclusive corners ((w+1)×(h+1) px).

Draws use the item's Python ``random.Random`` (:func:`tta.shifts.video.common.python_rng`), as the code uses
``random``. Boxes (``box_source``): ``metadata`` (default; ``context.main_objects`` = this video's entry of
``{dataset}_main_objects.json``; the embedded benchmark writes exact boxes) or the offline fallbacks (docs/shifts/mlvp.md, offline substitutes)
that write the same schema: ``saliency`` (spectral-residual box per frame, median-smoothed over the clip) and
``centre`` (a centred box of 30 % of the frame). A missing entry or frame key is an error unless ``fallback`` is
``saliency`` or ``centre``. (The ``owlv2_gt`` fallback needs OWLv2 weights and is not implemented.)
"""

from __future__ import annotations

import logging
import math

import cv2
import numpy as np
import torch

from tta.shifts.registry import register_video_shift
from tta.shifts.video.common import ShiftContext, python_rng

log = logging.getLogger(__name__)

AREA_CODE = (0.30, 0.425, 0.55, 0.675, 0.80)
AREA_PAPER = (0.30, 0.40, 0.50, 0.60, 0.80)
FALLBACKS = ("none", "saliency", "centre")


def _entry(label: str, box, frame_index: int) -> list[dict]:
    return [{"frame_index": frame_index, "label": label, "box": [float(v) for v in box], "rank_score": 1.0}]


def centre_objects(frames: np.ndarray, indices) -> dict[str, list[dict]]:
    """Offline box source ``centre`` (docs/shifts/mlvp.md): a centred box of 30 % of the frame area with the frame's aspect ratio, every frame."""
    h, w = frames.shape[1:3]
    bw, bh = w * math.sqrt(0.3), h * math.sqrt(0.3)
    box = [(w - bw) / 2, (h - bh) / 2, (w + bw) / 2, (h + bh) / 2]
    return {str(int(i)): _entry("centre", box, int(i)) for i in indices}


def saliency_box(frame: np.ndarray, width: int = 64) -> list[float] | None:
    """Spectral-residual saliency (Hou & Zhang, 2007) box of one RGB frame, in native pixels (docs/shifts/mlvp.md, offline substitutes)."""
    h, w = frame.shape[:2]
    sw = min(width, w)
    sh = max(1, round(h * sw / w))
    grey = cv2.resize(cv2.cvtColor(frame, cv2.COLOR_RGB2GRAY), (sw, sh), interpolation=cv2.INTER_AREA)
    spec = np.fft.fft2(grey.astype(np.float64))
    log_amp = np.log(np.abs(spec) + 1e-8)
    residual = log_amp - cv2.blur(log_amp, (3, 3), borderType=cv2.BORDER_REFLECT)
    sal = np.abs(np.fft.ifft2(np.exp(residual + 1j * np.angle(spec)))) ** 2
    sal = cv2.GaussianBlur(sal, (0, 0), 3.0)
    sal = cv2.resize(sal, (w, h), interpolation=cv2.INTER_LINEAR)
    mask = (sal > 3.0 * sal.mean()).astype(np.uint8)
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask, connectivity=8)
    if n <= 1:
        return None
    k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    x, y, bw, bh = (int(v) for v in stats[k, :4])
    return [x, y, x + bw, y + bh]


def saliency_objects(frames: np.ndarray, indices) -> dict[str, list[dict]]:
    """Offline box source ``saliency`` (docs/shifts/mlvp.md): per-frame spectral-residual boxes, each coordinate median-smoothed over the clip."""
    from scipy import ndimage  # loaded by the shifts that use it, not by every import of the registry
    h, w = frames.shape[1:3]
    fallback = centre_objects(frames[:1], [0])["0"][0]["box"]
    boxes = np.array([saliency_box(f) or fallback for f in frames], dtype=np.float64)
    boxes = ndimage.median_filter(boxes, size=(min(5, len(boxes)), 1), mode="nearest")
    return {str(int(i)): _entry("salient", b, int(i)) for i, b in zip(indices, boxes, strict=True)}


def occlude(frames: torch.Tensor, objects: dict, indices, ratio: float, rng) -> tuple[torch.Tensor, list]:
    """Black out one patch per frame following docs/shifts/mlvp.md (App. E.2, Alg. 3); returns (frames, patches [(x0, y0, x1, y1) inclusive | None])."""
    out = frames.clone()
    t, h, w, _ = frames.shape
    prev: tuple[int, int, int, int] | None = None  # x0, y0, w, h of the last patch
    patches = []
    for f, idx in enumerate(indices):
        key = str(int(idx))
        if key not in objects:
            raise KeyError(f"frame {key} has no entry in the main-objects metadata (keys: {sorted(objects)[:8]}...)")
        ranked = objects[key]
        patch = None
        if ranked:
            x1, y1, x2, y2 = (int(v) for v in ranked[0]["box"])
            x1, x2 = max(0, min(x1, w)), max(0, min(x2, w))
            y1, y2 = max(0, min(y1, h)), max(0, min(y2, h))
            bw, bh = x2 - x1, y2 - y1
            if bw > 0 and bh > 0:
                pw, ph = int(bw * math.sqrt(ratio)), int(bh * math.sqrt(ratio))
                x0 = rng.randrange(x1, max(x1 + 1, x2 - pw))
                y0 = rng.randrange(y1, max(y1 + 1, y2 - ph))
                patch = prev = (x0, y0, pw, ph)
        elif prev is not None:
            dx, dy = rng.randint(-5, 5), rng.randint(-5, 5)
            patch = prev = (prev[0] + dx, prev[1] + dy, prev[2], prev[3])
        else:
            pw, ph = rng.randrange(w // 8, max(w // 8 + 1, w // 4)), rng.randrange(h // 8, max(h // 8 + 1, h // 4))
            patch = prev = ((w - pw) // 2, (h - ph) // 2, pw, ph)
        if patch is None:
            patches.append(None)
            continue
        x0, y0, pw, ph = patch
        xa, ya, xb, yb = max(0, x0), max(0, y0), min(w - 1, x0 + pw), min(h - 1, y0 + ph)
        if xb >= xa and yb >= ya:
            out[f, ya:yb + 1, xa:xb + 1] = 0
            patches.append((xa, ya, xb, yb))
        else:
            patches.append(None)
    return out, patches


def resolve_objects(frames: torch.Tensor, context: ShiftContext | None, box_source: str, fallback: str):
    """(ranked objects per frame key, frame indices) for this clip, from metadata or an offline fallback (docs/shifts/mlvp.md)."""
    if box_source not in ("metadata", "saliency", "centre") or fallback not in FALLBACKS:
        raise ValueError(f"occlusion box_source must be metadata, saliency or centre and fallback one of "
                         f"{FALLBACKS}; got {box_source!r}, {fallback!r}")
    indices = list(context.frame_indices) if context is not None and context.frame_indices is not None else None
    source = box_source
    if source == "metadata":
        entry = context.main_objects if context is not None else None
        if entry is not None and indices is not None and all(str(int(i)) in entry["ranked_objects_per_frame"]
                                                              for i in indices):
            return entry["ranked_objects_per_frame"], indices
        if fallback == "none":
            vid = getattr(context, "video_id", "?")
            why = ("no frame indices were given" if indices is None else
                   "no main-objects entry" if entry is None else "missing frame keys")
            raise ValueError(f"main_object_occlusion: {why} for video {vid!r}. The shift needs "
                             "`{dataset}_main_objects.json` (spec/mlvp.md §5.1) in the dataset root, or an offline "
                             "fallback: shift.options.fallback=saliency (or centre), or box_source=saliency.")
        source = fallback
    indices = indices if indices is not None else list(range(frames.shape[0]))
    arr = frames.cpu().numpy()
    objects = saliency_objects(arr, indices) if source == "saliency" else centre_objects(arr, indices)
    return objects, indices


@register_video_shift("main_object_occlusion", level="mid")
def main_object_occlusion(frames: torch.Tensor, severity: int, generator: torch.Generator,
                          context: ShiftContext | None = None, area_table: str = "code", box_source: str = "metadata",
                          fallback: str = "none") -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3) with a black patch on the main object per frame (docs/shifts/mlvp.md, App. E.2)."""
    if area_table not in ("code", "paper"):
        raise ValueError(f"occlusion area_table must be code or paper, got {area_table!r}")
    ratio = (AREA_CODE if area_table == "code" else AREA_PAPER)[severity - 1]
    objects, indices = resolve_objects(frames, context, box_source, fallback)
    if len(indices) != frames.shape[0]:
        raise ValueError(f"{len(indices)} frame indices for a clip of {frames.shape[0]} frames")
    out, _ = occlude(frames, objects, indices, ratio, python_rng(generator))
    return out
