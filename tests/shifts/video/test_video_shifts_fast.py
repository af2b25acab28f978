"""Every registered video shift on the in-memory moving-shapes clip (fast tier): the contract of
:func:`tta.shifts.perturb_video` - uint8 (T', H, W, 3) out, T' = T unless the shift changes time, bit-exact for a
fixed item seed - and a severity trend (severity 5 departs from the clean clip at least as far as severity 1).
Also the stream path: :class:`tta.data.stream.ShiftSpec` applies the shift of a run per item, mixed streams
included. The shift-specific checks live in tests/test_shift_video_*.py and tests/shifts/video/test_shift_schiappa.py."""

from __future__ import annotations

import pytest
import torch

from tests.fixtures import moving_shape_clip
from tests.shifts.video.video_shift_env import context_for, donor_pool  # noqa: F401  (fixture)
from tta.data.stream import ShiftSpec
from tta.shifts import item_seed, perturb_video, shift_kind, video_shift_names
from tta.shifts.registry import get_shift

NAMES = video_shift_names()
# departure from the clean clip is not monotone in severity for these (documented in their own tests)
NOT_MONOTONE = {"elastic_distortion", "temporal_scrambling", "event_insertion", "schiappa_jumbling",
                "schiappa_box_jumbling", "schiappa_reverse_sampling", "schiappa_freeze", "schiappa_sampling",
                "schiappa_static_rotate", "schiappa_translation", "main_object_occlusion"}
# the full AdaIN needs VGG weights on disk: tests/shifts/video/test_shift_video_mid_high.py (full tier)
NOT_IN_FAST = {"style_transfer"}
# snow blurs with ImageMagick (a native library): the full tier tests it (tests/shifts/test_shift_fidelity.py); the fast
# tier checks snow_approx, the same snow layers with the tap-sum blur
NOT_IN_FAST = NOT_IN_FAST | {"snow"}
# x264's default lookahead/mbtree is not bit-stable under CPU load (tests/shifts/video/test_shift_video_contract.py)
OPTIONS = {"h264_compression": {"x264_params": "rc-lookahead=0:mbtree=0"}}
LENGTH = {"schiappa_jumbling": 24, "schiappa_freeze": 24, "schiappa_box_jumbling": 96}  # boxes of up to 32 frames


def _clip(name: str) -> torch.Tensor:
    t = LENGTH.get(name, 24 if get_shift(name).group == "B" else 8)
    return torch.from_numpy(moving_shape_clip(t=t, h=48, w=64, seed=3))


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    n = min(len(a), len(b))
    return (a[:n].float() - b[:n].float()).abs().mean().item()


def test_every_video_shift_is_video_kind():
    assert len(NAMES) >= 26
    for name in NAMES:
        assert shift_kind(name) == "video"
        assert get_shift(name).group in ("A", "B")


@pytest.mark.parametrize("name", [n for n in NAMES if n not in NOT_IN_FAST])
def test_contract_determinism_and_severity_trend(name, donor_pool):  # noqa: F811
    clip = _clip(name)
    ctx = context_for(name, clip, donor_pool)
    info = get_shift(name)
    outs = {}
    for severity in (info.severities[0], info.severities[-1]):
        seed = item_seed(7, "q", name, severity)
        out = perturb_video(clip, name, severity, seed, context=ctx, **OPTIONS.get(name, {}))
        assert out.dtype == torch.uint8 and out.dim() == 4 and out.shape[1:] == clip.shape[1:], name
        if not info.changes_length:  # group B may return the run's num_frames uniform frames instead (§2.2)
            allowed = {clip.shape[0], ctx.num_frames} if info.group == "B" else {clip.shape[0]}
            assert out.shape[0] in allowed, f"{name} changed the clip length to {out.shape[0]}"
        again = perturb_video(clip, name, severity, seed, context=ctx, **OPTIONS.get(name, {}))
        assert torch.equal(out, again), f"{name} s{severity} is not deterministic for a fixed seed"
        outs[severity] = out
    lo, hi = (_distance(outs[s], clip) for s in (info.severities[0], info.severities[-1]))
    assert hi > 0, f"{name} at its top severity leaves the clip unchanged"
    if name not in NOT_MONOTONE:
        assert hi >= lo * 0.95, f"{name}: severity {info.severities[-1]} ({hi:.2f}) is milder than " \
                                f"{info.severities[0]} ({lo:.2f})"


@pytest.mark.parametrize("name", ["gaussian", "fog", "schiappa_rotation", "mixed_severity", "mixed_types"])
def test_shiftspec_applies_the_run_shift_per_item(name):
    clip = torch.from_numpy(moving_shape_clip(t=8, seed=1))
    severity = 0 if name.startswith("mixed") else 3
    options = (("base", "gaussian"), ("severities", (1, 2, 3, 4, 5))) if name == "mixed_severity" else ()
    spec = ShiftSpec(name, severity, seed=5, options=options)
    a, b = spec.video(clip, "video7"), spec.video(clip, "video7")
    assert a.dtype == torch.uint8 and a.shape == clip.shape and torch.equal(a, b)
    resolved, sev, _ = spec.resolve("video7")
    assert shift_kind(resolved) == "video" and 1 <= sev <= 5
    assert [r[0] for r in spec.plan(["v1", "v2"])] == ["v1", "v2"]
    assert torch.equal(ShiftSpec().video(clip, "video7"), clip)
