"""Low-level geometric shift of MLVP: elastic distortion (docs/shifts/mlvp.md, App. E.1), one warp for every frame.

(α, σ, a)_s = (488, 170.8, 24.4), (488, 19.52, 48.8), (12.2, 2.44, 4.88), (17.08, 2.44, 4.88),
(29.28, 2.44, 4.88): ImageNet-C's 244 × (2, 0.7, 0.1), ... (Table 37). Once per video, in this draw order:

1. an affine map M from three points around the centre, c ± q with c = (H//2, W//2), q = min(H, W)//3, read as
   (x, y) (ImageNet-C's row/column mix-up, kept), each of the 6 coordinates jittered by U(-a, a);
2. displacements dx = α·G_σ(U(-1, 1)^{H×W}), then dy likewise; G_σ is SciPy's Gaussian filter, reflect mode,
   truncated at 3σ (correct even when 3σ exceeds the frame, as at severity 1).

Per frame, on x/255: bilinear affine warp with reflect-101 borders, then bilinear resampling at
(row + dy, col + dx) with half-sample reflect borders (SciPy ``map_coordinates(order=1, mode="reflect")``), clip
and trunc. Both warps run as ``grid_sample`` over the whole clip (``reflection`` padding with
``align_corners=True`` is reflect-101, with ``align_corners=False`` SciPy's reflect), so they run on the
frames' device. Severities 1-2 are dominated by the affine jitter and 3-5 by local warping: severity is **not**
monotone (inherited from ImageNet-C; App. E.4 and F.3 report it).
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
import torch.nn.functional as F

from tta.shifts.registry import register_batched, register_video_shift
from tta.shifts.video.common import numpy_rng, to_uint8, to_unit

ELASTIC = ((244 * 2, 244 * 0.7, 244 * 0.1), (244 * 2, 244 * 0.08, 244 * 0.2), (244 * 0.05, 244 * 0.01, 244 * 0.02),
           (244 * 0.07, 244 * 0.01, 244 * 0.02), (244 * 0.12, 244 * 0.01, 244 * 0.02))


def elastic_params(h: int, w: int, alpha: float, sigma: float, jitter: float, rng: np.random.Generator):
    """The per-video draws: forward affine M (2, 3) and displacement fields dx, dy (H, W), in the order of docs/shifts/mlvp.md (App. E.1)."""
    from scipy import ndimage  # loaded by the shifts that use it, not by every import of the registry
    centre = np.float32([h // 2, w // 2])
    q = min(h, w) // 3
    src = np.float32([centre + q, [centre[0] + q, centre[1] - q], centre - q])
    dst = (src + rng.uniform(-jitter, jitter, size=src.shape)).astype(np.float32)
    affine = cv2.getAffineTransform(src, dst)
    fields = []
    for _ in range(2):  # dx first, then dy
        noise = rng.uniform(-1, 1, size=(h, w))
        fields.append(alpha * ndimage.gaussian_filter(noise, sigma, mode="reflect", truncate=3.0))
    return affine, fields[0], fields[1]


def _grids(h: int, w: int, affine: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """The two sampling grids (H, W, 2) of one video: the affine warp's, then the displacement's."""
    rows, cols = torch.meshgrid(torch.arange(h, dtype=torch.float64), torch.arange(w, dtype=torch.float64),
                                indexing="ij")
    inv = cv2.invertAffineTransform(affine)  # warpAffine samples src at M^-1 (x, y)
    sx = inv[0, 0] * cols + inv[0, 1] * rows + inv[0, 2]
    sy = inv[1, 0] * cols + inv[1, 1] * rows + inv[1, 2]
    affine_grid = torch.stack([2 * sx / (w - 1) - 1, 2 * sy / (h - 1) - 1], dim=-1).float()
    sx = cols + torch.from_numpy(dx)
    sy = rows + torch.from_numpy(dy)
    return affine_grid, torch.stack([(2 * sx + 1) / w - 1, (2 * sy + 1) / h - 1], dim=-1).float()


def _warp(frames: torch.Tensor, affine_grid: torch.Tensor, shift_grid: torch.Tensor) -> torch.Tensor:
    """uint8 (B, H, W, 3) frames, grids (B, H, W, 2) -> the warped uint8 frames (both warps on the frames' device)."""
    if min(frames.shape[1:3]) < 2:
        raise ValueError(f"elastic distortion needs frames of at least 2×2 pixels, got {tuple(frames.shape[1:3])}")
    x = to_unit(frames).permute(0, 3, 1, 2)
    x = F.grid_sample(x, affine_grid, mode="bilinear", padding_mode="reflection", align_corners=True)
    x = F.grid_sample(x, shift_grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    return to_uint8(x.permute(0, 2, 3, 1))


def elastic_warp(frames: torch.Tensor, affine: np.ndarray, dx: np.ndarray, dy: np.ndarray) -> torch.Tensor:
    """Apply one affine map and one displacement field to every frame: uint8 (T, H, W, 3) -> uint8."""
    t, h, w, _ = frames.shape
    if min(h, w) < 2:
        raise ValueError(f"elastic distortion needs frames of at least 2×2 pixels, got {h}×{w}")
    a, d = (g.to(frames.device).expand(t, h, w, 2) for g in _grids(h, w, affine, dx, dy))
    return _warp(frames, a, d)


@register_video_shift("elastic_distortion", level="low")
def elastic_distortion(frames: torch.Tensor, severity: int, generator: torch.Generator) -> torch.Tensor:
    """frames: uint8 (T, H, W, 3) -> uint8 (T, H, W, 3); the same warp on every frame (docs/shifts/mlvp.md, App. E.1)."""
    alpha, sigma, jitter = ELASTIC[severity - 1]
    _, h, w, _ = frames.shape
    affine, dx, dy = elastic_params(h, w, alpha, sigma, jitter, numpy_rng(generator))
    return elastic_warp(frames, affine, dx, dy)


@register_batched("elastic_distortion", exact=True)
def elastic_distortion_batch(frames: torch.Tensor, severity: int, generators) -> torch.Tensor:
    """uint8 (N, T, H, W, 3) -> the same; each video's warp drawn from its own generator, all frames warped at once."""
    alpha, sigma, jitter = ELASTIC[severity - 1]
    n, t, h, w, _ = frames.shape
    if min(h, w) < 2:
        raise ValueError(f"elastic distortion needs frames of at least 2×2 pixels, got {h}×{w}")
    grids = [_grids(h, w, *elastic_params(h, w, alpha, sigma, jitter, numpy_rng(g))) for g in generators]
    a, d = (torch.stack([g[i] for g in grids]).to(frames.device)[:, None].expand(n, t, h, w, 2).reshape(n * t, h, w, 2)
            for i in (0, 1))
    return _warp(frames.reshape(n * t, h, w, 3), a, d).reshape(frames.shape)
