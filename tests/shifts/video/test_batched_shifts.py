"""Batches of clips through the registry: vectorised torch twins against their per-clip reference implementations."""

from __future__ import annotations

import pytest
import torch

from tests.shifts.video.video_shift_env import textured_clip
from tta.shifts import perturb_video
from tta.shifts.registry import _VIDEO, get_shift

TWINS = sorted(n for n, info in _VIDEO.items() if info.batched is not None)
EXACT = [n for n in TWINS if _VIDEO[n].batched_exact]  # the others: tests/shifts/kernels/test_farneback.py
OPTIONS = {"gaussian": {"temporal_mode": "iid"}, "impulse": {"temporal_mode": "iid"},
           "schiappa_speckle_noise": {"temporal_mode": "static"}}
DETERMINISTIC = {"schiappa_zoom_blur", "brightness", "contrast", "grayscale", "schiappa_jpeg", "motion_blur",
                 "video_defocus"}  # no randomness: seeds change nothing


def batch(n: int = 3) -> torch.Tensor:
    return torch.stack([textured_clip(t=6, h=40, w=56, seed=i, moving=i % 2 == 0) for i in range(n)])


def test_the_expected_shifts_have_twins():
    assert {"gaussian", "impulse", "fog", "elastic_distortion", "schiappa_speckle_noise", "schiappa_zoom_blur",
            "frost_approx", "brightness", "contrast", "grayscale", "snow_approx", "schiappa_jpeg", "motion_blur",
            "video_defocus"} <= set(TWINS)
    assert {"motion_blur", "video_defocus"}.isdisjoint(EXACT)


@pytest.mark.parametrize("name", EXACT)
@pytest.mark.parametrize("severity", [1, 5])
def test_twin_equals_the_reference_clip_by_clip(name, severity):
    """Exact twins (registry ``batched_exact``) are bit-identical on the CPU, with default and non-default options."""
    assert get_shift(name).batched_exact
    clips, seeds = batch(), [11, 12, 13]
    for options in ({}, OPTIONS.get(name)) if name in OPTIONS else ({},):
        out = perturb_video(clips, name, severity, seeds, backend="torch", **options)
        ref = torch.stack([perturb_video(c, name, severity, s, backend="reference", **options)
                           for c, s in zip(clips, seeds, strict=True)])
        assert out.shape == clips.shape and torch.equal(out, ref)


@pytest.mark.parametrize("name", [n for n in TWINS if n not in DETERMINISTIC])
def test_batches_are_deterministic_per_seed(name):
    clips = batch(2)
    a = perturb_video(clips, name, 3, [1, 2])
    assert torch.equal(a, perturb_video(clips, name, 3, [1, 2]))
    assert torch.equal(a[1], perturb_video(clips[1], name, 3, 2))  # a clip's output does not depend on its batch
    assert not torch.equal(a[0], perturb_video(clips, name, 3, [3, 2])[0])


def test_shifts_without_twin_run_clip_by_clip_in_a_batch():
    clips = batch(2)
    out = perturb_video(clips, "temporal_scrambling", 5, [4, 5])
    assert torch.equal(out[0], perturb_video(clips[0], "temporal_scrambling", 5, 4))


def test_batch_input_errors_are_one_clear_line():
    clips = batch(2)
    with pytest.raises(ValueError, match="needs as many seeds"):
        perturb_video(clips, "gaussian", 3, [1])
    with pytest.raises(ValueError, match="has no vectorised torch implementation"):
        perturb_video(clips, "temporal_scrambling", 3, [1, 2], backend="torch")
    with pytest.raises(ValueError, match="backend must be one of"):
        perturb_video(clips, "gaussian", 3, [1, 2], backend="numpy")


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", TWINS)
def test_cuda_twin_matches_the_cpu_reference(name):
    """On CUDA the same fields are drawn (on the CPU); float kernels may round differently: <= 1 grey level on
    < 0.1 % of values (docs/shifts/mlvp.md, Speed)."""
    clips, seeds = batch(), [11, 12, 13]
    gpu = perturb_video(clips.cuda(), name, 5, seeds)
    assert gpu.is_cuda
    diff = (gpu.cpu().int() - perturb_video(clips, name, 5, seeds, backend="reference").int()).abs()
    assert diff.max() <= 1 and (diff > 0).float().mean() < 1e-3
