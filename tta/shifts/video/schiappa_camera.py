"""Camera perturbations of Schiappa et al. (NeurIPS 2022 D&B, Sec. 3.1): static rotate, rotation, translation.

Frame by frame on the sampled native frames (group A), with the severity scales of the authors' generator. The
translation takes the generator's 224-crop-of-256 shake at native resolution and resizes back, so the frame size is
kept while the content shakes by the same fraction of the frame (docs/shifts/schiappa-video.md, "Camera").
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tta.shifts.registry import register_video_shift

STATIC_ROTATE_DEGREES = (7.5, 15.0, 30.0, 45.0, 90.0)
ROTATION_MAX_DEGREES = (6, 12, 18, 24, 30)  # 6·s
TRANSLATE_MAX_OFFSET = (8, 16, 24, 32, 40)  # 8·s pixels at a short side of 256 (offsets 0..8s-1)
TRANSLATE_REFERENCE_SIDE = 256
TRANSLATE_MARGIN = 32  # 256 - 224


def rotate_frames(frames: torch.Tensor, degrees: torch.Tensor) -> torch.Tensor:
    """Counter-clockwise rotation about the frame centre, nearest neighbour, black outside (as PIL ``rotate``).

    Args:
        frames: uint8 (T, H, W, 3).
        degrees: (T,) or (1,) angles in degrees.

    Returns:
        uint8 (T, H, W, 3).
    """
    t, h, w, _ = frames.shape
    theta = torch.deg2rad(degrees.to(torch.float64)).reshape(-1, 1, 1)
    ys = torch.arange(h, dtype=torch.float64).reshape(1, h, 1) + 0.5 - h / 2.0
    xs = torch.arange(w, dtype=torch.float64).reshape(1, 1, w) + 0.5 - w / 2.0
    cos, sin = torch.cos(theta), torch.sin(theta)
    src_x = torch.floor(xs * cos - ys * sin + w / 2.0).long()  # inverse map of a CCW rotation (y axis down)
    src_y = torch.floor(xs * sin + ys * cos + h / 2.0).long()
    src_x, src_y = torch.broadcast_tensors(src_x, src_y)
    inside = (src_x >= 0) & (src_x < w) & (src_y >= 0) & (src_y < h)
    dev = frames.device
    out = frames[torch.arange(t, device=dev).reshape(t, 1, 1), src_y.clamp(0, h - 1).to(dev), src_x.clamp(0, w - 1).to(dev)]
    return out * inside.to(dev).unsqueeze(-1).to(torch.uint8)


@register_video_shift("schiappa_static_rotate", level="mid")
def static_rotate(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Every frame rotated CCW by 7.5/15/30/45/90 degrees. frames: uint8 (T, H, W, 3) -> same shape."""
    return rotate_frames(frames, torch.tensor([STATIC_ROTATE_DEGREES[severity - 1]]))


def rotation_angles(num_frames: int, severity: int, generator: torch.Generator) -> torch.Tensor:
    """(T,) integer angles, uniform in [-6s, 6s], one per frame."""
    m = ROTATION_MAX_DEGREES[severity - 1]
    return torch.randint(-m, m + 1, (num_frames,), generator=generator)


@register_video_shift("schiappa_rotation", level="mid")
def rotation(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Each frame rotated CCW by its own random integer angle in [-6s, 6s]. uint8 (T, H, W, 3) -> same shape."""
    return rotate_frames(frames, rotation_angles(frames.shape[0], severity, generator))


def translation_offsets(num_frames: int, severity: int, generator: torch.Generator) -> torch.Tensor:
    """(T, 2) per-frame (dy, dx) offsets at the reference short side 256, uniform in {0, ..., 8s - 1}."""
    return torch.randint(0, TRANSLATE_MAX_OFFSET[severity - 1], (num_frames, 2), generator=generator)


@register_video_shift("schiappa_translation", level="mid")
def translation(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """Camera shake: a per-frame crop at a random offset, resized back to the frame size.

    frames: uint8 (T, H, W, 3) -> same shape (see the module docstring for the scaling to native resolution).
    """
    t, h, w, _ = frames.shape
    scale = min(h, w) / TRANSLATE_REFERENCE_SIDE
    margin = max(1, round(TRANSLATE_MARGIN * scale))
    if margin >= min(h, w):
        raise ValueError(f"schiappa_translation needs frames larger than {margin} pixels, got {h}x{w}")
    ch, cw = h - margin, w - margin
    offsets = torch.floor(translation_offsets(t, severity, generator).to(torch.float64) * scale).long()
    rows = offsets[:, 0:1] + torch.arange(ch).reshape(1, ch)  # (T, ch)
    cols = offsets[:, 1:2] + torch.arange(cw).reshape(1, cw)  # (T, cw)
    inside = (rows < h).reshape(t, ch, 1) & (cols < w).reshape(t, 1, cw)
    dev = frames.device
    crop = frames[torch.arange(t, device=dev).reshape(t, 1, 1), rows.clamp(max=h - 1).reshape(t, ch, 1).to(dev),
                  cols.clamp(max=w - 1).reshape(t, 1, cw).to(dev)]
    crop = crop * inside.to(dev).unsqueeze(-1).to(torch.uint8)
    x = crop.permute(0, 3, 1, 2).to(torch.float32)
    x = F.interpolate(x, size=(h, w), mode="bilinear", align_corners=False)
    return x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1).contiguous()
