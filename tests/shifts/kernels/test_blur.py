"""The flow blurs' faster arithmetic (tta/shifts/kernels/blur.py) against the reference's calls: filter2D, the
masked copy and np.percentile."""

from __future__ import annotations

import cv2
import numpy as np
import pytest

from tests.shifts.video.test_flow_blur import scene
from tta.shifts.kernels.blur import blur_blend, correlate_pair, correlate_torch, percentile_linear
from tta.shifts.video.flow_blur import disk_kernel, line_kernel


@pytest.mark.parametrize("kernels", [[line_kernel(25, 15.0 * i) for i in range(12)], [disk_kernel(10)] * 12,
                                     [disk_kernel(20)] * 12, [disk_kernel(3)] * 12])
def test_large_kernel_correlation_matches_filter2d(kernels):
    """Line kernels correlated directly in bands, disks through one forward DFT per plane shared by the two blurs:
    <= 1 grey level from filter2D, on < 0.01 % of values."""
    clip = scene(t=12).numpy()
    sets = [kernels, [disk_kernel(12)] * 12]
    for out, ks in zip(correlate_pair(clip, sets), sets, strict=True):
        ref = np.stack([cv2.filter2D(f, -1, k, borderType=cv2.BORDER_REFLECT_101)
                        for f, k in zip(clip, ks, strict=True)])
        diff = np.abs(out.astype(int) - ref)
        assert out.dtype == np.uint8 and diff.max() <= 1 and (diff > 0).mean() < 1e-4


@pytest.mark.parametrize("pair", ["motion", "defocus", "defocus_small", "static_none"])
def test_blur_blend_equals_the_two_blurs_then_the_masked_copy(pair):
    """The fused CPU blur-and-blend gives exactly correlate_pair's pixels picked by the mask (large and small
    kernels, one kernel per frame or one shared, and ``static_regions=none``, where the frame stays)."""
    clip = scene(t=12).numpy()
    masks = np.random.default_rng(4).random((12, *clip.shape[1:3])) < 0.25
    highs, lows = {"motion": ([line_kernel(17, 30.0 * i) for i in range(12)], [line_kernel(9, 30.0 * i)
                                                                                for i in range(12)]),
                   "defocus": ([disk_kernel(12)] * 12, [disk_kernel(6)] * 12),
                   "defocus_small": ([disk_kernel(4)] * 12, [disk_kernel(3)] * 12),
                   "static_none": ([disk_kernel(8)] * 12, None)}[pair]
    if lows is None:
        high, low = correlate_pair(clip, [highs])[0], clip.copy()
    else:
        high, low = correlate_pair(clip, [highs, lows])
    np.copyto(low, high, where=masks[..., None])
    before = clip.copy()
    assert np.array_equal(blur_blend(clip, highs, lows, masks), low)
    assert np.array_equal(clip, before)  # the input frames are left as they were


def test_grouped_torch_convolution_matches_filter2d_within_one_grey_level():
    """The CUDA blend path (run here on CPU tensors): <= 1 grey level, on < 0.1 % of values, from filter2D."""
    clip = scene(t=12)
    for kernels in ([line_kernel(25, 15.0 * i) for i in range(12)], [disk_kernel(10)] * 12,
                    [disk_kernel(3)] * 6 + [disk_kernel(6)] * 6):
        ref = np.stack([cv2.filter2D(f, -1, k, borderType=cv2.BORDER_REFLECT_101)
                        for f, k in zip(clip.numpy(), kernels, strict=True)])
        diff = np.abs(correlate_torch(clip, kernels).numpy().astype(int) - ref)
        assert diff.max() <= 1 and (diff > 0).mean() < 1e-3


def test_percentile_is_numpys_to_the_bit():
    """The mask's threshold: one partition and a minimum give np.percentile's value exactly (sizes 1 to a frame,
    ties, all-equal, tiny values, weights below and above 0.5, non-finite input)."""
    rng = np.random.default_rng(5)
    for n in (1, 2, 3, 5, 10, 101, 4800, 76800):
        for v in (rng.random(n), np.zeros(n), rng.integers(0, 3, n).astype(float), rng.exponential(size=n) * 1e-7,
                  np.hypot(rng.normal(size=n), rng.normal(size=n))):
            for q in (75.0, 0.0, 33.3, 50.0, 90.0, 100.0):
                assert percentile_linear(v, q) == np.percentile(v, q), (n, q)
    v = rng.random(50)
    v[3] = np.nan
    assert np.isnan(percentile_linear(v, 75.0))
