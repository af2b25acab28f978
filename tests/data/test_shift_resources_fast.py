"""Video-shift helpers without the rendered benchmark (fast tier): AdaIN statistics transfer and the stylise loop
with stand-in networks, shift resources for shifts that need none, main-object files, Schiappa categories."""

from __future__ import annotations

import json

import torch
from torch import nn

from tests.fixtures import tiny_model
from tta.data.shift_resources import build_resources, find_main_objects, model_digest
from tta.data.stream import ShiftSpec
from tta.shifts.video.adain import adain, channel_stats, stylise
from tta.shifts.video.schiappa import SCHIAPPA_CATEGORY, SCHIAPPA_SHIFTS
from tta.synth.vocab import COLOURS, colour_rgb


def test_adain_transfers_channel_statistics():
    gen = torch.Generator().manual_seed(0)
    content = torch.randn(2, 4, 8, 8, generator=gen) * 3 + 1
    style = torch.randn(1, 4, 8, 8, generator=gen) * 0.5 - 2
    out = adain(content, style)
    (mo, so), (ms, ss) = channel_stats(out), channel_stats(style)
    torch.testing.assert_close(mo, ms.expand_as(mo), atol=1e-4, rtol=0)
    torch.testing.assert_close(so, ss.expand_as(so), atol=1e-3, rtol=1e-3)


def test_stylise_alpha_zero_is_the_decoded_content():
    enc, dec = nn.Conv2d(3, 4, 1), nn.Conv2d(4, 3, 1)
    frames, style = torch.rand(5, 3, 8, 8), torch.rand(1, 3, 8, 8)
    with torch.no_grad():
        plain = dec(enc(frames))
    torch.testing.assert_close(stylise(frames, style, 0.0, enc, dec, chunk=2), plain)
    assert stylise(frames, style, 1.0, enc, dec).shape == frames.shape


def test_resources_only_for_shifts_that_need_them(tmp_path):
    pairs = [type("P", (), {"video_id": f"v{i}"})() for i in range(3)]
    assert build_resources(ShiftSpec("gaussian", 3), None, None, pairs, None, tmp_path) == {}
    assert build_resources(ShiftSpec(), None, None, pairs, None, tmp_path) == {}


def test_find_main_objects(tmp_path):
    assert find_main_objects(tmp_path, "synth") is None
    (tmp_path / "other_main_objects.json").write_text(json.dumps({}))
    assert find_main_objects(tmp_path, "synth").name == "other_main_objects.json"
    (tmp_path / "synth_main_objects.json").write_text(json.dumps({}))
    assert find_main_objects(tmp_path, "synth").name == "synth_main_objects.json"


def test_model_digest_tracks_the_weights():
    a, b = tiny_model("meanp"), tiny_model("meanp")
    assert model_digest(a) == model_digest(b)
    with torch.no_grad():
        next(b.parameters()).add_(1.0)
    assert model_digest(a) != model_digest(b)


def test_schiappa_categories_and_vocab():
    assert set(SCHIAPPA_SHIFTS) == set(SCHIAPPA_CATEGORY) and "Temporal" in SCHIAPPA_CATEGORY.values()
    for name in COLOURS:
        rgb = colour_rgb(name)
        assert len(rgb) == 3 and all(0 <= c <= 255 for c in rgb)
