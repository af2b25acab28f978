"""Flow-driven blurs (motion blur, video defocus): the fast driver against the per-frame reference, flow options."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tta.media.frames import uniform_frame_indices
from tta.shifts import perturb_video
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.flow_blur import (
    FARNEBACK,
    MOTION_LENGTHS,
    high_motion_mask,
    line_kernel,
)


def scene(t: int = 24, h: int = 96, w: int = 128, seed: int = 0) -> torch.Tensor:
    """uint8 (T, H, W, 3): a textured background drifting 1 px/frame and a textured block crossing it at 4 px/frame."""
    rng = np.random.default_rng(seed)
    tex = lambda hh, ww: cv2.resize(rng.integers(0, 256, (hh // 4, ww // 4, 3)).astype(np.uint8), (ww, hh),  # noqa: E731
                                    interpolation=cv2.INTER_CUBIC)
    back, block = tex(h, w + t), tex(32, 32)
    frames = []
    for i in range(t):
        f = back[:, t - i:t - i + w].copy()
        x = 4 * i % (w - 32)
        f[30:62, x:x + 32] = block
        frames.append(f)
    return torch.from_numpy(np.stack(frames))


def reference_motion_blur(frames: np.ndarray, severity: int, n: int = 12) -> np.ndarray:
    """Alg. 2 frame by frame, as the reference code: full-resolution Farneback, np.percentile mask, filter2D."""
    out = []
    for t in uniform_frame_indices(frames.shape[0], n):
        g = [cv2.cvtColor(frames[max(t - 1, 0)], cv2.COLOR_RGB2GRAY), cv2.cvtColor(frames[t], cv2.COLOR_RGB2GRAY)]
        flow = (np.zeros(frames.shape[1:3] + (2,), np.float32) if t == 0
                else cv2.calcOpticalFlowFarneback(g[0], g[1], None, **FARNEBACK))
        mag = np.hypot(flow[..., 0].astype(np.float64), flow[..., 1].astype(np.float64))
        mask = mag >= np.percentile(mag, 75)
        angle = np.degrees(np.arctan2(flow[..., 1].mean(), flow[..., 0].mean() + 1e-8))
        blur = [cv2.filter2D(frames[t], -1, line_kernel(L, float(angle)), borderType=cv2.BORDER_REFLECT_101)
                for L in MOTION_LENGTHS[severity - 1]]
        out.append(np.where(mask[..., None], blur[1], blur[0]))
    return np.stack(out)


@pytest.mark.parametrize("severity", [1, 5])
def test_default_driver_matches_the_per_frame_reference(severity):
    """Same flow and mask; the shared-DFT blurs differ from filter2D by <= 1 grey level on rounding ties only."""
    clip = scene()
    out = perturb_video(clip, "motion_blur", severity, 0, context=ShiftContext(num_frames=12)).numpy()
    diff = np.abs(out.astype(int) - reference_motion_blur(clip.numpy(), severity))
    assert diff.max() <= 1 and (diff > 0).mean() < 1e-4


@pytest.mark.parametrize("name", ["motion_blur", "video_defocus"])
def test_flow_scale_half_stays_within_the_documented_tolerance(name):
    """flow_scale=0.5 (docs/shifts/mlvp.md, Speed): mean |diff| <= 2.5 grey levels, > 8 levels on <= 8 % of values."""
    clip = scene()
    ctx = ShiftContext(num_frames=12)
    full = perturb_video(clip, name, 5, 0, context=ctx).numpy().astype(int)
    half = perturb_video(clip, name, 5, 0, context=ctx, flow_scale=0.5).numpy().astype(int)
    diff = np.abs(full - half)
    assert 0 < diff.mean() <= 2.5 and (diff > 8).mean() <= 0.08


def test_upsampled_mask_keeps_the_top_quarter():
    flow = np.random.default_rng(0).normal(size=(24, 32, 2)).astype(np.float32)
    mask = high_motion_mask(flow, (48, 64))
    assert mask.shape == (48, 64) and abs(mask.mean() - 0.25) < 0.02
    assert np.array_equal(mask[::2, ::2], high_motion_mask(flow))


def test_dis_flow_is_an_option_and_bad_flow_options_are_refused():
    clip = scene()
    ctx = ShiftContext(num_frames=12)
    dis = perturb_video(clip, "motion_blur", 3, 0, context=ctx, flow="dis")
    assert dis.shape == (12, 96, 128, 3) and not torch.equal(dis, perturb_video(clip, "motion_blur", 3, 0, context=ctx))
    with pytest.raises(ValueError, match="shift.options.flow must be one of"):
        perturb_video(clip, "motion_blur", 3, 0, context=ctx, flow="lucas")
    with pytest.raises(ValueError, match="flow_scale must be in"):
        perturb_video(clip, "video_defocus", 3, 0, context=ctx, flow_scale=2)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", ["motion_blur", "video_defocus"])
def test_cuda_path_matches_the_cpu_reference(name):
    """``auto`` on CUDA is the twin (Farnebäck in torch on the GPU); ``reference`` keeps OpenCV's flow on the CPU and
    blurs on the GPU. Both give the CPU's masks, so the blurs' rounding ties are the only difference."""
    clip = scene()
    ctx = ShiftContext(num_frames=12)
    cpu = perturb_video(clip, name, 5, 0, context=ctx)
    for backend in ("auto", "reference"):
        gpu = perturb_video(clip.cuda(), name, 5, 0, context=ctx, backend=backend)
        assert gpu.is_cuda
        diff = (gpu.cpu().int() - cpu.int()).abs()
        assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3, backend


@pytest.mark.parametrize("override", ["shift.options.flow=lk", "shift.options.flow_scale=0"])
def test_bad_flow_options_fail_before_the_stream(override):
    """Checked when the run builds its shifts, not inside a loader worker (whose traceback would wrap the line)."""
    from tta.scenario import stream_shifts
    from tta.utils.config import compose

    with pytest.raises(ValueError, match=r"shift.options.flow(_scale)? must be"):
        stream_shifts(compose("run", ["shift=motion_blur", override]), "video")
