"""Mid-level, motion-driven blurs of MLVP: motion blur and video defocus (docs/shifts/mlvp.md, App. E.2).

Group B, one shared driver (Alg. 2): the shift receives every decoded frame, takes the uniform frame indices over
the decoded count (docs/shifts/mlvp.md, frames) and, for each sampled index t, computes OpenCV Farneback dense flow from grey frame t-1
to grey frame t at full resolution (pyr_scale 0.5, levels 3, winsize 15, iterations 3, poly_n 5, poly_sigma 1.2;
zero flow for t = 0). Pixels whose flow magnitude reaches the frame's 75th percentile (linear interpolation) form
a hard high-motion mask M; the output is ``M ? blur_high(frame) : blur_low(frame)``, each blur a 2-D correlation of
the whole uint8 frame (same kernel on all channels, reflect-101 border, rounded). For t = 0 the flow is zero, so
thr = 0, M ≡ 1 and the whole frame gets the high kernel (angle 0). The shift returns the ``num_frames`` sampled,
blurred frames (the pipeline's uniform rule over them is the identity).

* **motion blur**: (L_low, L_high)_s = (5, 9) ... (13, 25); one angle per frame θ = atan2(mean f_y,
  mean f_x + 1e-8) (y down); kernel = L×L zeros with a middle row of ones, rotated (bilinear, zero border) and
  normalised (a box line). ``angle_convention``: ``flow`` (default: rotate by -θ about the kernel centre, so the
  streak follows the flow, App. E.2) or ``legacy`` (the code's +θ about (L/2, L/2): mirrored on diagonals).
* **defocus**: r_low = 3, 4, 6, 8, 10, r_high = 2·r_low; disk 1[X² + Y² <= r²] normalised, then Gaussian-smoothed
  at σ = 0.1 (3×3 for r <= 8, else 5×5) as ImageNet-C; no randomness. ``static_regions``: ``low_kernel`` (code) or
  ``none`` (pixels outside the mask stay sharp, "primarily to moving regions", App. E.2).
"""

from __future__ import annotations

import math

import cv2
import numpy as np
import torch

from tta.media.frames import uniform_frame_indices
from tta.shifts.registry import register_video_shift
from tta.shifts.video.common import ShiftContext

MOTION_LENGTHS = ((5, 9), (7, 13), (9, 17), (11, 21), (13, 25))  # (L_low, L_high), docs/shifts/mlvp.md, App. E.2
DEFOCUS_RADII = (3, 4, 6, 8, 10)  # r_low; r_high = 2 r_low, docs/shifts/mlvp.md, App. E.2
FARNEBACK = dict(pyr_scale=0.5, levels=3, winsize=15, iterations=3, poly_n=5, poly_sigma=1.2, flags=0)
HIGH_MOTION_PERCENTILE = 75.0


def sampled_flows(frames: np.ndarray, indices: list[int]):
    """Yield (index, flow (H, W, 2) float32) for each sampled index (zero flow at index 0), grey frames cached."""
    grey: dict[int, np.ndarray] = {}

    def g(i: int) -> np.ndarray:
        if i not in grey:
            grey[i] = cv2.cvtColor(frames[i], cv2.COLOR_RGB2GRAY)
        return grey[i]

    h, w = frames.shape[1:3]
    for t in indices:
        if t == 0:
            yield t, np.zeros((h, w, 2), np.float32)
        else:
            yield t, cv2.calcOpticalFlowFarneback(g(t - 1), g(t), None, **FARNEBACK)


def high_motion_mask(flow: np.ndarray) -> np.ndarray:
    """Boolean (H, W): flow magnitude >= its 75th percentile (about the top 25 % of pixels)."""
    mag = np.sqrt(flow[..., 0].astype(np.float64) ** 2 + flow[..., 1].astype(np.float64) ** 2)
    return mag >= np.percentile(mag, HIGH_MOTION_PERCENTILE)


def line_kernel(length: int, angle: float, convention: str = "flow") -> np.ndarray:
    """Normalised L×L box-line kernel rotated by ``angle`` degrees (see the module docstring for conventions)."""
    k = np.zeros((length, length), np.float32)
    k[length // 2, :] = 1.0
    if convention == "flow":
        rot = cv2.getRotationMatrix2D(((length - 1) / 2.0, (length - 1) / 2.0), -angle, 1.0)
    elif convention == "legacy":
        rot = cv2.getRotationMatrix2D((length / 2.0, length / 2.0), angle, 1.0)
    else:
        raise ValueError(f"motion_blur angle_convention must be flow or legacy, got {convention!r}")
    k = cv2.warpAffine(k, rot, (length, length), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_CONSTANT)
    total = k.sum()
    if total <= 0:
        raise ValueError(f"rotated motion kernel of length {length} at {angle}° is empty")
    return k / total


def disk_kernel(radius: int, alias_sigma: float = 0.1) -> np.ndarray:
    """ImageNet-C's defocus disk: 1[X² + Y² <= r²] on [-r, r]², normalised, Gaussian-smoothed at σ = 0.1."""
    ax = np.arange(-radius, radius + 1)
    xx, yy = np.meshgrid(ax, ax)
    disk = ((xx ** 2 + yy ** 2) <= radius ** 2).astype(np.float32)
    disk /= disk.sum()
    ksize = (3, 3) if radius <= 8 else (5, 5)
    return cv2.GaussianBlur(disk, ksize=ksize, sigmaX=alias_sigma)


def _correlate(frame: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    return cv2.filter2D(frame, -1, kernel, borderType=cv2.BORDER_REFLECT_101)


def _drive(frames: torch.Tensor, context: ShiftContext | None, blur_pair) -> torch.Tensor:
    arr = np.ascontiguousarray(frames.cpu().numpy())
    n = context.num_frames if context is not None else 12
    indices = uniform_frame_indices(arr.shape[0], n)
    out = []
    for t, flow in sampled_flows(arr, indices):
        mask = high_motion_mask(flow)
        low, high = blur_pair(arr[t], flow)
        out.append(np.where(mask[..., None], high, low))
    return torch.from_numpy(np.stack(out)).to(frames.device)


@register_video_shift("motion_blur", level="mid", group="B")
def motion_blur(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                angle_convention: str = "flow") -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, blurred frames (docs/shifts/mlvp.md, App. E.2)."""
    l_low, l_high = MOTION_LENGTHS[severity - 1]

    def pair(frame, flow):
        angle = math.degrees(math.atan2(float(flow[..., 1].mean()), float(flow[..., 0].mean()) + 1e-8))
        return (_correlate(frame, line_kernel(l_low, angle, angle_convention)),
                _correlate(frame, line_kernel(l_high, angle, angle_convention)))

    return _drive(frames, context, pair)


@register_video_shift("video_defocus", level="mid", group="B")
def video_defocus(frames: torch.Tensor, severity: int, generator: torch.Generator, context: ShiftContext | None = None,
                  static_regions: str = "low_kernel") -> torch.Tensor:
    """frames: every decoded frame uint8 (T, H, W, 3) -> the ``num_frames`` sampled, defocused frames (docs/shifts/mlvp.md, App. E.2)."""
    if static_regions not in ("low_kernel", "none"):
        raise ValueError(f"video_defocus static_regions must be low_kernel or none, got {static_regions!r}")
    r = DEFOCUS_RADII[severity - 1]
    k_low, k_high = disk_kernel(r), disk_kernel(2 * r)

    def pair(frame, flow):
        low = _correlate(frame, k_low) if static_regions == "low_kernel" else frame
        return low, _correlate(frame, k_high)

    return _drive(frames, context, pair)
