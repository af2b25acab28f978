"""The Gaussian MLVP shift and the public shift interface (spec/mlvp.md §3, §4.1)."""

from __future__ import annotations

import pytest
import torch

from tta.shifts import item_seed, perturb_video, video_shift_names
from tta.shifts.video.noise import GAUSSIAN_SIGMA


def grey_clip(t=4, h=64, w=80, value=128):
    return torch.full((t, h, w, 3), value, dtype=torch.uint8)


def test_registered():
    assert "gaussian" in video_shift_names()


def test_seeded_and_order_independent():
    clip = torch.randint(0, 256, (3, 16, 16, 3), dtype=torch.uint8)
    s1 = item_seed(42, "video7", "gaussian", 3)
    assert s1 == item_seed(42, "video7", "gaussian", 3) != item_seed(42, "video8", "gaussian", 3)
    a = perturb_video(clip, "gaussian", 3, s1)
    perturb_video(clip, "gaussian", 3, 123)  # another item in between changes nothing
    b = perturb_video(clip, "gaussian", 3, s1)
    assert torch.equal(a, b) and a.dtype == torch.uint8 and a.shape == clip.shape
    assert not torch.equal(a, perturb_video(clip, "gaussian", 3, s1 + 1))


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_noise_std_matches_sigma(severity):
    out = perturb_video(grey_clip(), "gaussian", severity, 7).float()
    diff = (out - 128.0) / 255.0
    # truncation toward zero biases by ~0.5/255; clipping is negligible for σ ≤ 0.26 at mid grey
    if severity <= 3:  # at mid grey, clipping at 0 and 1 shrinks the std noticeably only from σ = 0.26 on
        assert abs(diff.std().item() - GAUSSIAN_SIGMA[severity - 1]) < 0.01
    assert diff.abs().mean() > 0.5 * GAUSSIAN_SIGMA[severity - 1]


def test_one_field_per_video_and_iid_option():
    clip = grey_clip(t=5)
    out = perturb_video(clip, "gaussian", 5, 1)
    assert all(torch.equal(out[0], out[t]) for t in range(5)), "a static clip stays static (temporal consistency)"
    iid = perturb_video(clip, "gaussian", 5, 1, temporal_mode="iid")
    assert not torch.equal(iid[0], iid[1])


def test_severity_monotone_degradation():
    torch.manual_seed(0)
    clip = torch.randint(40, 216, (2, 48, 48, 3), dtype=torch.uint8)
    errs = [(perturb_video(clip, "gaussian", s, 3).float() - clip.float()).abs().mean().item() for s in range(1, 6)]
    assert errs == sorted(errs)


def test_bad_inputs():
    with pytest.raises(ValueError, match="severity 6 is out of range.*\\[1, 2, 3, 4, 5\\]"):
        perturb_video(grey_clip(), "gaussian", 6, 0)
    with pytest.raises(KeyError, match="unknown shift 'gausian'"):
        perturb_video(grey_clip(), "gausian", 1, 0)
    with pytest.raises(ValueError, match="uint8"):
        perturb_video(grey_clip().float(), "gaussian", 1, 0)
