"""The embedded benchmark: determinism, caption grammar, metadata, MP4 round trip, resumable build."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tta.data.cache import FrameCache
from tta.data.readers.msrvtt import read_msrvtt_split
from tta.synth.build import SynthConfig, build_synth, derive_rng
from tta.synth.render import STYLE_GEOMETRY, render
from tta.synth.scene import caption, sample_scene
from tta.synth.vocab import COLOURS, SHAPES


def test_scene_and_frames_are_deterministic():
    a = sample_scene(derive_rng(1, "synth", 5, "scene"))
    b = sample_scene(derive_rng(1, "synth", 5, "scene"))
    assert a == b
    fa, ba = render(a)
    fb, bb = render(b)
    assert np.array_equal(fa, fb) and ba == bb
    c = sample_scene(derive_rng(1, "synth", 6, "scene"))
    assert c != a


@pytest.mark.parametrize("style", ["a", "b"])
def test_render_geometry_texture_and_boxes(style):
    rng = np.random.default_rng(0)
    for _ in range(10):
        scene = sample_scene(rng, style)
        frames, boxes = render(scene)
        g = STYLE_GEOMETRY[style]
        assert frames.shape == (g["frames"], g["height"], g["width"], 3) and frames.dtype == np.uint8
        # textured background: not flat
        assert frames[0].reshape(-1, 3).std(0).mean() > 5
        main = scene.objects[0]
        visible = [b for b in boxes if b is not None]
        assert visible, "the main object is visible in some frame"
        if main.event == "appear":
            assert boxes[0] is None and boxes[-1] is not None
        if main.event == "disappear":
            assert boxes[0] is not None and boxes[-1] is None
        # the box is where the object's colour is (style a draws the solid colour, shaded)
        if style == "a" and main.event not in ("recolour",):
            t = next(i for i, b in enumerate(boxes) if b is not None)
            x1, y1, x2, y2 = (int(round(v)) for v in boxes[t])
            assert 0 <= x1 < x2 <= g["width"] and 0 <= y1 < y2 <= g["height"]


def test_partial_render_equals_full_render():
    scene = sample_scene(np.random.default_rng(3), "b")
    full, boxes = render(scene)
    part, pboxes = render(scene, only=[5, 2])
    assert np.array_equal(part[0], full[5]) and np.array_equal(part[1], full[2])
    assert pboxes == [boxes[5], boxes[2]]


def test_event_changes_frame_order_information():
    """Frame order carries meaning: a colour change puts the new colour only in late frames."""
    rng = np.random.default_rng(11)
    while True:
        scene = sample_scene(rng, "a")
        if scene.objects[0].event == "recolour" and len(scene.objects) == 1:
            break
    frames, boxes = render(scene)
    new = np.asarray(COLOURS[scene.objects[0].event_colour][0], np.float32)

    def colour_share(t):
        x1, y1, x2, y2 = (int(v) for v in boxes[t])
        patch = frames[t, y1:y2, x1:x2].reshape(-1, 3).astype(np.float32)
        return float((np.abs(patch - new).sum(1) < 90).mean())

    assert colour_share(len(frames) - 1) > colour_share(0) + 0.1


def test_captions_vary_and_are_mostly_unique():
    rng = np.random.default_rng(0)
    caps = [caption(sample_scene(rng, "a"), rng) for _ in range(1000)]
    assert len(set(caps)) / len(caps) > 0.97
    words = {w for c in caps for w in c.split()}
    # synonyms are used: several names of the same colour/shape appear
    assert {"red", "crimson", "scarlet"} <= words and {"ball", "circle"} <= words
    caps_b = [caption(sample_scene(rng, "b"), rng) for _ in range(200)]
    # style b reads differently: punctuated sentences, where style a is MSR-VTT-like plain lower case
    assert all(("." in c or ";" in c) for c in caps_b) and not any(("." in c or ";" in c) for c in caps)
    assert all(any(s in c for syn in SHAPES.values() for s in syn) for c in caps)


def test_build_msrvtt_format_metadata_and_resume(tmp_path):
    cfg = SynthConfig(name="synth", n_train=6, n_val=2, n_test=5, captions_per_train_video=2)
    root = build_synth(cfg, tmp_path, workers=1)
    test = read_msrvtt_split(root, "test")
    train = read_msrvtt_split(root, "train")
    val = read_msrvtt_split(root, "val")
    assert (len(train), len(val), len(test)) == (12, 2, 5)
    assert len({p.video_id for p in test}) == 5
    meta = json.loads((root / "synth_main_objects.json").read_text())
    entry = meta[test[0].video_id]
    assert set(entry) == {"video_path", "video_caption", "ranked_objects_per_frame"}
    objs = [o for lst in entry["ranked_objects_per_frame"].values() for o in lst]
    assert objs and set(objs[0]) == {"frame_index", "label", "box", "rank_score"}
    # real MP4: decodes to 12 uniform frames of the native size
    clip = FrameCache(None).get(test[0].video_path)
    assert clip.shape == (12, 96, 128, 3) and clip.dtype == torch.uint8
    # resume: an incomplete build (no manifest) keeps its finished videos and completes
    mtime = (root / "videos" / "video0.mp4").stat().st_mtime_ns
    (root / "manifest.json").unlink()
    (root / "videos" / "video3.mp4").unlink()
    root2 = build_synth(cfg, tmp_path, workers=1)
    assert root2 == root and (root / "manifest.json").exists() and (root / "videos" / "video3.mp4").exists()
    assert (root / "videos" / "video0.mp4").stat().st_mtime_ns == mtime
