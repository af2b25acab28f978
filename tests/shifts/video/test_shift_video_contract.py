"""Contract of every MLVP video shift (spec/mlvp.md §1-§3): registry, dtype/shape, seeding, temporal consistency."""

from __future__ import annotations

import pytest
import torch

from tests.shifts.video.video_shift_env import MLVP, NO_RANDOMNESS, context_for, donor_pool, textured_clip  # noqa: F401
from tta.shifts import item_seed, perturb_video, video_shift_names
from tta.shifts.registry import get_shift

GROUP_B = {"h264_compression", "motion_blur", "video_defocus", "temporal_scrambling"}
REPRODUCIBLE_X264 = "rc-lookahead=0:mbtree=0"  # x264's default lookahead/mbtree is not bit-stable under CPU load


def test_h264_default_rate_control_is_near_reproducible():
    """The code's rate control (default) may differ by a few levels between encodes on a busy CPU (codec.py)."""
    from tta.shifts.video.common import ShiftContext

    clip = textured_clip(t=30, h=96, w=128)
    runs = [perturb_video(clip, "h264_compression", 5, 0, context=ShiftContext(fps=8.0)).float() for _ in range(2)]
    assert (runs[0] - runs[1]).abs().mean() < 3.0


def test_all_twelve_registered_with_levels_and_groups():
    assert set(MLVP) <= set(video_shift_names())
    levels = {n: get_shift(n).level for n in MLVP}
    assert [n for n in MLVP if levels[n] == "low"] == list(MLVP[:6])  # Sec. 3 levels
    assert [n for n in MLVP if levels[n] == "mid"] == list(MLVP[6:9])
    assert [n for n in MLVP if levels[n] == "high"] == list(MLVP[9:])
    assert {n for n in MLVP if get_shift(n).group == "B"} == GROUP_B
    assert all(get_shift(n).severities == (1, 2, 3, 4, 5) for n in MLVP)


@pytest.mark.parametrize("name", MLVP)
def test_dtype_shape_and_seeding(name, donor_pool):  # noqa: F811
    clip = textured_clip(t=30 if name in GROUP_B else 12)
    ctx = context_for(name, clip, donor_pool)
    seed = item_seed(42, "q", name, 3)
    opts = {"x264_params": REPRODUCIBLE_X264} if name == "h264_compression" else {}
    out = perturb_video(clip, name, 3, seed, context=ctx, **opts)
    assert out.dtype == torch.uint8 and out.shape[1:] == clip.shape[1:]
    expected_t = {"h264_compression": 30, "motion_blur": 12, "video_defocus": 12, "temporal_scrambling": 12}
    assert out.shape[0] == expected_t.get(name, 12)
    perturb_video(textured_clip(seed=5, t=clip.shape[0]), name, 3, seed + 1, context=ctx)  # another item between
    again = perturb_video(clip, name, 3, seed, context=ctx, **opts)
    assert torch.equal(out, again), "the same item seed regenerates the clip bit for bit"
    other = perturb_video(clip, name, 3, seed + 1, context=ctx, **opts)
    if name in NO_RANDOMNESS:
        assert torch.equal(out, other), f"{name} draws nothing (spec/mlvp.md §1)"
    else:
        assert not torch.equal(out, other)
    assert not torch.equal(out[: min(12, len(out))], clip[: min(12, len(out))]) or name == "temporal_scrambling"


@pytest.mark.parametrize("name", ["gaussian", "impulse", "fog", "elastic_distortion", "style_transfer_approx"])
def test_static_clip_stays_static(name):
    """One realisation per video (App. E "Temporal Consistency"): a static clip stays static."""
    clip = textured_clip(t=6, moving=False)
    assert all(torch.equal(clip[0], clip[t]) for t in range(6))
    out = perturb_video(clip, name, 5, 11)
    assert all(torch.equal(out[0], out[t]) for t in range(6))


@pytest.mark.parametrize("name", [n for n in ("snow", "snow_approx") if n in MLVP or n == "snow_approx"])
def test_snow_is_animated_on_a_static_clip(name):
    out = perturb_video(textured_clip(t=4, moving=False), name, 5, 3)
    assert not torch.equal(out[0], out[1]), "the curtain scrolls 3 px per frame (§4.4)"


@pytest.mark.parametrize("name", ["gaussian", "impulse"])
def test_iid_temporal_mode(name):
    out = perturb_video(textured_clip(t=3, moving=False), name, 5, 1, temporal_mode="iid")
    assert not torch.equal(out[0], out[1])


def test_unknown_option_and_context_handling():
    clip = textured_clip(t=3)
    with pytest.raises(TypeError):
        perturb_video(clip, "fog", 1, 0, no_such_option=1)
    # a context is dropped for shifts that do not take one
    assert torch.equal(perturb_video(clip, "fog", 1, 0, context=object()), perturb_video(clip, "fog", 1, 0))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("name", ["gaussian", "impulse", "fog", "snow_approx", "elastic_distortion",
                                  "style_transfer_approx"])
def test_cuda_matches_cpu(name):
    clip = textured_clip()
    cpu = perturb_video(clip, name, 4, 9)
    gpu = perturb_video(clip.cuda(), name, 4, 9)
    assert gpu.is_cuda and (gpu.cpu().int() - cpu.int()).abs().max() <= 1
