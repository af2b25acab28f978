"""The probe's events: the multi-event embedded clips (synth_comp) and ActivityNet Captions' annotation format."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from tta.comp.disrupt import action_replace, join_events, positive_text, seg_mismatch
from tta.data.readers.activitynet import read_activitynet_events
from tta.synth.build import derive_rng
from tta.synth.multi_event import CompSynthConfig, render_events, visual_class
from tta.synth.scene import sample_scene
from tta.synth.vocab import COLOURS, MOTIONS

REPO = Path(__file__).resolve().parents[2]


def test_synth_comp_clip_matches_its_events(tmp_path):
    cfg = CompSynthConfig(n_train=1, n_val=0, n_test=1, frames_per_event=6, recolour_events=False)
    (tmp_path / "videos").mkdir()
    record = cfg.make_video(1, tmp_path)
    motions = record["scene"]["motions"]
    described = record["events"][0]
    events = described["events"]
    assert 3 <= len(events) == len(motions) <= 4
    assert record["num_frames"] == 6 * len(motions) == len(record["boxes"])
    seconds = 6 / 8  # style a renders at 8 fps
    assert [(e["start"], e["end"]) for e in events] == [(k * seconds, (k + 1) * seconds) for k in range(len(events))]
    assert record["captions"][0] == join_events([e["text"] for e in events], described["prefix"])
    for motion, event in zip(motions, events, strict=True):
        assert event["action"] == event["text"] and event["text"] in MOTIONS[motion]
        # a replacement names a motion of a class the clip never shows
        shown = {p for m in MOTIONS if visual_class(m) in {visual_class(x) for x in motions} for p in MOTIONS[m]}
        assert event["alternatives"] and not set(event["alternatives"]) & shown
    assert all(visual_class(a) != visual_class(b) for a, b in zip(motions, motions[1:], strict=False))
    from tta.media.video import video_frame_count

    assert video_frame_count(tmp_path / "videos" / "video1.mp4") == record["num_frames"]


def test_recoloured_events_show_their_colour_in_order_and_keep_the_motion_replaceable(tmp_path):
    cfg = CompSynthConfig(n_train=1, n_val=0, n_test=3, frames_per_event=4, recolour_events=True)
    (tmp_path / "videos").mkdir()
    for i in range(1, 3):
        record = cfg.make_video(i, tmp_path)
        colours, motions = record["scene"]["colours"], record["scene"]["motions"]
        assert len(set(colours)) == len(colours) == len(motions)
        described = record["events"][0]
        assert not any(word in described["prefix"].split() for c in COLOURS for word in COLOURS[c][1])
        for colour, motion, event in zip(colours, motions, described["events"], strict=True):
            assert event["text"].endswith(f" and {event['action']}") and event["action"] in MOTIONS[motion]
            assert any(word in event["text"].split() for word in COLOURS[colour][1])
        # the rendered object's centre pixel has the event's colour in every frame of its segment
        scene = sample_scene(derive_rng(cfg.seed, cfg.name, i, "scene"), style=cfg.style, p_second=0.0)
        assert scene.to_dict().items() <= record["scene"].items()
        frames, boxes = render_events(scene, motions, 4, colours)
        for t, box in enumerate(boxes):
            if box is None:
                continue
            x, y = int((box[0] + box[2]) / 2), int((box[1] + box[3]) / 2)
            pixel = frames[t, y, x].astype(float)  # the shading moves a pixel by a few levels; colours differ by 90+
            nearest = min(COLOURS, key=lambda c: np.abs(pixel - np.asarray(COLOURS[c][0], float)).max())
            assert nearest == colours[t // 4], (t, colours)
    # the motion-only dataset keeps the key its checkpoints were trained under
    assert CompSynthConfig().key() == CompSynthConfig(recolour_events=False).key() == "synth_comp-5b66c6fd06"
    assert CompSynthConfig(recolour_events=True).key() != CompSynthConfig().key()


def _anet_root(tmp_path: Path) -> Path:
    """An ActivityNet Captions root in the official val_1.json format (events listed out of time order)."""
    root = tmp_path / "anet"
    (root / "videos").mkdir(parents=True)
    val1 = {
        "v_QOlSCBRmfWY": {"duration": 82.73, "timestamps": [[30.0, 60.81], [0.83, 19.86], [17.37, 90.0]],
                          "sentences": [" He then throws the ball across the field.", "A man is seen standing in a field.",
                                        " The man jumps over a bar and lands on a mat."]},
        "v_ehGHCYKzyZ8": {"duration": 61.72, "timestamps": [[0.0, 61.72]], "sentences": ["People play soccer."]},
    }
    (root / "val_1.json").write_text(json.dumps(val1))
    return root


def test_read_activitynet_events_refuses_unpaired_timestamps(tmp_path):
    root = _anet_root(tmp_path)
    data = json.loads((root / "val_1.json").read_text())
    data["v_ehGHCYKzyZ8"]["timestamps"].append([1.0, 2.0])
    (root / "val_1.json").write_text(json.dumps(data))
    with pytest.raises(ValueError, match="one \\[start, end\\] 'timestamps' pair per sentence"):
        read_activitynet_events(root / "val_1.json")


@pytest.mark.heavy  # loads WordNet (several seconds)
def test_activitynet_items_from_timestamps_and_wordnet(tmp_path):
    from tta.comp.items import load_comp_items

    cfg = OmegaConf.load(REPO / "tta" / "conf" / "data" / "activitynet.yaml")
    cfg.root = str(_anet_root(tmp_path))
    items = load_comp_items(cfg, "test", tmp_path)
    assert [it.video_id for it in items] == ["v_QOlSCBRmfWY"]  # one event: no composition to probe
    it = items[0]
    assert [e.start for e in it.events] == [0.83, 17.37, 30.0]  # sorted by start time
    assert it.events[1].end == 82.73  # clamped to the duration
    assert [e.action for e in it.events] == ["standing", "jumps", "throws"]  # "is seen" introduces the action
    assert all(a.endswith("s") for a in it.events[2].alternatives)  # inflected like "throws"
    assert positive_text(it).startswith("A man is seen standing in a field, then the man jumps")
    negative = action_replace(it, np.random.default_rng(0))
    changed = [(a, b) for a, b in zip(positive_text(it).split(), negative.split(), strict=True) if a != b]
    assert len(changed) == 1 and changed[0][0] in ("standing", "jumps", "throws")
    one, two = seg_mismatch(it, np.random.default_rng(0))
    assert (one.start, one.end, two.start, two.end) == (0.83, 82.73, 17.37, 82.73)
