"""Mid- and high-level MLVP shifts (spec/mlvp.md §4.7-§4.12): flow blurs, occlusion, style, event, scrambling."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
import torch

from tests.shifts.video.video_shift_env import BOX, donor_pool, main_objects, sample_video, textured_clip  # noqa: F401
from tta.media.frames import uniform_frame_indices
from tta.shifts import perturb_video
from tta.shifts.video.common import ShiftContext
from tta.shifts.video.event import donor_frame_count
from tta.shifts.video.flow_blur import disk_kernel, high_motion_mask, line_kernel, sampled_flows
from tta.shifts.video.occlusion import AREA_CODE, AREA_PAPER
from tta.shifts.video.style import lab_to_rgb, rgb_to_lab
from tta.shifts.video.temporal import SCRAMBLE_Q, scramble_indices

# ------------------------------------------------------------------------------------------------ flow blurs


@pytest.mark.parametrize("length", [5, 9, 25])
def test_kernels_sum_to_one_and_point_along_the_flow(length):
    for conv in ("flow", "legacy"):
        assert abs(line_kernel(length, 37.0, conv).sum() - 1) < 1e-5
    assert abs(disk_kernel(length // 2).sum() - 1) < 1e-5
    k = line_kernel(length, 0.0)
    assert np.allclose(k[length // 2].sum(), 1.0, atol=1e-5)  # horizontal flow -> horizontal streak
    c = length // 2
    down_right = line_kernel(length, 45.0, "flow")  # flow (1, 1) in image coords (y down)
    assert down_right[c + 1, c + 1] > 0.5 * down_right[c, c] and down_right[c - 1, c + 1] < 1e-3
    legacy = line_kernel(length, 45.0, "legacy")  # the code's mirrored diagonal (§4.7)
    assert legacy[c - 1, c + 1] > 1e-3 and legacy[c + 1, c + 1] < 1e-3


def test_high_motion_mask_is_the_top_quarter_and_frame_zero_is_all_high():
    clip = textured_clip(t=30).numpy()
    idx = uniform_frame_indices(30, 12)
    flows = dict(sampled_flows(clip, idx))
    assert np.abs(flows[idx[1]]).mean() > 0.5  # the texture moves 2 px per frame
    frac = high_motion_mask(flows[idx[3]]).mean()
    assert 0.24 <= frac <= 0.5
    assert idx[0] == 0 and high_motion_mask(flows[0]).all()  # T < 36: index 0 has zero flow, so M ≡ 1


@pytest.mark.parametrize("name", ["motion_blur", "video_defocus"])
def test_blur_grows_with_severity_on_a_real_video(name):
    from tta.media.video import read_all_frames, read_frames

    full, _ = read_all_frames(sample_video())
    clean = read_frames(sample_video(), uniform_frame_indices(full.shape[0], 12)).float()
    errs = [(perturb_video(full, name, s, 0, context=ShiftContext()).float() - clean).abs().mean().item()
            for s in range(1, 6)]
    assert errs == sorted(errs), errs


def test_defocus_static_regions_none_keeps_static_pixels_sharp():
    full = textured_clip(t=30)
    out = perturb_video(full, "video_defocus", 3, 0, static_regions="none")
    idx = uniform_frame_indices(30, 12)
    flows = dict(sampled_flows(full.numpy(), idx))
    for f, t in enumerate(idx[1:], start=1):
        static = ~high_motion_mask(flows[t])
        assert torch.equal(out[f][torch.from_numpy(static)], full[t][torch.from_numpy(static)])


# ------------------------------------------------------------------------------------------------- occlusion


@pytest.mark.parametrize("severity", [1, 3, 5])
@pytest.mark.parametrize("table", ["code", "paper"])
def test_occluded_area_is_rho_of_the_box(severity, table):
    clip = torch.full((12, 48, 64, 3), 255, dtype=torch.uint8)
    idx = list(range(0, 24, 2))
    ctx = ShiftContext(video_id="v", frame_indices=idx, main_objects=main_objects(idx))
    out = perturb_video(clip, "main_object_occlusion", severity, 3, context=ctx, area_table=table)
    rho = (AREA_CODE if table == "code" else AREA_PAPER)[severity - 1]
    bw, bh = BOX[2] - BOX[0], BOX[3] - BOX[1]
    expect = (int(bw * math.sqrt(rho)) + 1) * (int(bh * math.sqrt(rho)) + 1)  # inclusive corners
    black = (out == 0).all(-1)
    assert all(int(black[f].sum()) == expect for f in range(12))
    ys, xs = torch.nonzero(black[0], as_tuple=True)
    assert xs.min() >= BOX[0] and ys.min() >= BOX[1] and xs.max() <= BOX[2] and ys.max() <= BOX[3]
    positions = {tuple(torch.nonzero(black[f])[0].tolist()) for f in range(12)}
    assert len(positions) > 1, "the patch jitters inside the box, independently per frame"


def test_occlusion_empty_frames_and_fallbacks():
    clip = torch.full((12, 48, 64, 3), 255, dtype=torch.uint8)
    idx = list(range(12))
    ctx = ShiftContext(video_id="v", frame_indices=idx, main_objects=main_objects(idx, empty={0, 1, 7}))
    black = (perturb_video(clip, "main_object_occlusion", 5, 1, context=ctx) == 0).all(-1)
    # frames 0-1: a centred box ignoring severity, w in [W/8, W/4); frame 7: the previous patch moved by <= 5 px
    w0 = int(black[0].any(0).sum()) - 1
    assert 64 // 8 <= w0 < 64 // 4
    n6, n7 = torch.nonzero(black[6]), torch.nonzero(black[7])
    assert int(black[6].sum()) == int(black[7].sum()) and (n7[0] - n6[0]).abs().max() <= 5
    with pytest.raises(ValueError, match="main_objects.json"):
        perturb_video(clip, "main_object_occlusion", 5, 1, context=ShiftContext(video_id="v", frame_indices=idx))
    for fb in ("saliency", "centre"):
        out = perturb_video(clip, "main_object_occlusion", 5, 1, context=ShiftContext(frame_indices=idx), fallback=fb)
        assert (out == 0).all(-1).sum() > 0


# ----------------------------------------------------------------------------------------------------- style


def test_lab_round_trip_and_alpha_schedule():
    x = torch.rand(1000, 3)
    assert torch.allclose(lab_to_rgb(rgb_to_lab(x)), x, atol=1e-4)
    clip = textured_clip(t=2)
    dist = [(perturb_video(clip, "style_transfer_approx", s, 8).float() - clip.float()).abs().mean().item()
            for s in range(1, 6)]
    assert dist == sorted(dist)


def test_style_approx_matches_the_style_statistics_at_alpha_one(tmp_path):
    import cv2

    style = np.zeros((64, 64, 3), np.uint8)
    style[:32] = (200, 40, 40)
    style[32:] = (120, 20, 60)
    cv2.imwrite(str(tmp_path / "s.png"), cv2.cvtColor(style, cv2.COLOR_RGB2BGR))
    out = perturb_video(textured_clip(t=2), "style_transfer_approx", 5, 0, style_dir=str(tmp_path))
    lab_out = rgb_to_lab(out.float() / 255).reshape(2, -1, 3).mean(1)
    lab_style = rgb_to_lab(torch.from_numpy(style).float() / 255).reshape(-1, 3).mean(0)
    assert (lab_out - lab_style).abs().max() < 3.0  # uint8 rounding and clipping aside, the means are the style's
    with pytest.raises(FileNotFoundError, match="no png/jpg/jpeg"):
        perturb_video(textured_clip(t=2), "style_transfer_approx", 5, 0, style_dir=str(tmp_path / "empty"))
    assert torch.equal(perturb_video(textured_clip(t=2), "style_transfer_approx", 5, 0, allow_passthrough=True,
                                     style_dir=str(tmp_path / "empty")), textured_clip(t=2))


def test_full_adain_loads_weights_and_transfers_feature_statistics(tmp_path):
    from tta.shifts.video.adain import adain, channel_stats, decoder, normalised_vgg

    torch.manual_seed(0)
    torch.save(normalised_vgg().state_dict(), tmp_path / "vgg_normalised.pth")
    torch.save(decoder().state_dict(), tmp_path / "decoder.pth")
    clip = textured_clip(t=2, h=30, w=44)  # not a multiple of 8: the decoder's output is cropped back
    out = perturb_video(clip, "style_transfer", 3, 1, weights_dir=str(tmp_path))
    assert out.shape == clip.shape and out.dtype == torch.uint8
    assert torch.equal(out, perturb_video(clip, "style_transfer", 3, 1, weights_dir=str(tmp_path)))
    fc, fs = torch.randn(2, 8, 5, 5), torch.randn(1, 8, 7, 7) * 3 + 1
    m, s = channel_stats(adain(fc, fs))
    ms, ss = channel_stats(fs)
    assert torch.allclose(m, ms.expand_as(m), atol=1e-4) and torch.allclose(s, ss.expand_as(s), atol=1e-3)
    with pytest.raises(ValueError, match="weights_dir"):
        perturb_video(clip, "style_transfer", 3, 1)
    with pytest.raises(FileNotFoundError, match="decoder.pth"):
        perturb_video(clip, "style_transfer", 3, 1, weights_dir=str(tmp_path / "none"))


# ------------------------------------------------------------------------------------------- event insertion


@pytest.mark.parametrize("severity", [1, 3, 5])
@pytest.mark.parametrize("position", ["tail", "middle"])
def test_event_insertion_replaces_exactly_k_frames(severity, position, donor_pool):  # noqa: F811
    clip = textured_clip(t=12)
    out = perturb_video(clip, "event_insertion", severity, 0, position=position,
                        context=ShiftContext(video_id="q", resources={"donor_pool": donor_pool}))
    k = donor_frame_count(12, severity)
    assert k == (4, 5, 6, 7, 8)[severity - 1]
    red = (out[..., 0].float().mean((1, 2)) > 150) & (out[..., 2].float().mean((1, 2)) < 60)  # donor d1 is red
    assert int(red.sum()) == k, "the donor is the argmax of the raw dot product (d1), k frames"
    if position == "tail":
        assert torch.equal(out[: 12 - k], clip[: 12 - k]) and bool(red[12 - k:].all())
    else:
        head = math.ceil((12 - k) / 2)
        assert torch.equal(out[:head], clip[:head]) and bool(red[head:head + k].all())
        assert torch.equal(out[head + k:], clip[12 - (12 - k) // 2:])  # the LAST floor((F-k)/2) frames


def test_event_insertion_needs_a_pool_and_never_picks_itself(donor_pool):  # noqa: F811
    with pytest.raises(ValueError, match="donor pool"):
        perturb_video(textured_clip(), "event_insertion", 1, 0)
    assert donor_pool.donor_index("d1") == 0  # d1's own query would pick d1; it is excluded


# ------------------------------------------------------------------------------------------ temporal scrambling


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_scrambling_trims_then_permutes_chunks(severity):
    t = 480
    rng = random.Random(severity)
    idx = scramble_indices(t, severity, rng)
    m = t - int(t * SCRAMBLE_Q[severity - 1])
    assert len(idx) == 12 and max(idx) - min(idx) <= m - 1
    chunk = np.array_split(np.arange(m), 12)
    order = [int(np.searchsorted([c[0] for c in chunk], i - min(idx), side="right") - 1) for i in idx]
    assert sorted(order) == list(range(12)), "one frame per chunk"
    moved = sum(o != p for p, o in enumerate(order))
    if severity == 1:
        assert moved == 2 and any(abs(order[p] - p) == 1 for p in range(12))
    elif severity <= 4:
        assert moved == 2 * severity
    assert idx != sorted(idx)


def test_scrambling_short_span_draws_with_replacement_and_paper_semantics():
    idx = scramble_indices(40, 5, random.Random(0))  # 5 % of 40 = 2 frames kept
    assert len(idx) == 12 and len(set(idx)) <= 2
    kept = scramble_indices(100, 1, random.Random(0), semantics="paper_retention")
    assert max(kept) - min(kept) >= 50  # q = 0.6 kept instead of trimmed
