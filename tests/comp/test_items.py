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

    cfg = OmegaConf.load(REPO / "conf" / "data" / "activitynet.yaml")
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
    assert (one.start, one.end, two.start, two.end) == (17.37, 82.73, 30.0, 60.81)  # [c2] against [c3]


def test_activitynet_paragraph_drops_a_summary_caption_and_keeps_the_longer_of_two_near_duplicates():
    from tta.comp.items import paragraph_events

    annotated = [(0.0, 90.0, "A man plays the drums on a stage."),  # summary over the whole 90 s video
                 (0.0, 25.0, "A man walks onto the stage."), (24.0, 60.0, "He sits down and plays the drums."),
                 (26.0, 58.0, "He plays."),  # IoU 32/36 with the caption above: the shorter one goes
                 (61.0, 92.0, "He stands and bows to the crowd.")]
    kept = paragraph_events(annotated, 90.0)
    assert [s for _, _, s in kept] == ["A man walks onto the stage.", "He sits down and plays the drums.",
                                       "He stands and bows to the crowd."]
    assert kept[-1][1] == 90.0  # clipped to the video
    # a caption over exactly two other events is no summary (Sec. 3.1.1 drops those over more than two)
    two = paragraph_events([(0.0, 40.0, "x"), (0.0, 20.0, "y"), (20.0, 40.0, "z"), (50.0, 60.0, "w")], 60.0)
    assert [s for _, _, s in two] == ["y", "x", "z", "w"]  # sorted by start, then end


ANET_SENTENCES = [
    "A man is seen standing in a field.", "He carries a bag across the room.", "The man throws the ball to a dog.",
    "A woman puts a cup on a table.", "They walk down the street.", "The girl jumped into the pool.",
    "A boy is riding a bike down a hill.", "She cuts the paper with scissors.", "The men push the car forward.",
    "A woman is washing dishes in a sink.", "He kicks the ball into the goal.", "The dog runs after the frisbee.",
    "Two people are dancing on a stage.", "She pours water into a glass.", "He lifts a heavy weight over his head.",
    "The child climbs up the ladder.", "A man catches a fish from the river.", "She holds the baby in her arms.",
    "The players hit the ball with sticks.", "He paints the wall with a roller.", "A woman brushes her hair.",
    "The man opened the door and walked in.", "They swim across the lake.", "She mixes the ingredients in a bowl.",
]


@pytest.mark.slow
def test_five_hundred_action_replacements_are_grammatical():
    """Every sampled replacement is a dictionary verb form (lemminflect: no "carrys"), in the original's Penn tag
    (so it agrees with the same subject), and of a verb that can take the original's object or go without one."""
    from lemminflect import getAllLemmas, getInflection

    from tta.comp.disrupt import CompItem, Event, replaced_events
    from tta.comp.items import OBJECT_OPENERS, key_action, penn_tag, verb_frames

    rng = np.random.default_rng(0)
    events = []
    for k, sentence in enumerate(ANET_SENTENCES):
        action, alternatives = key_action(sentence)
        if action:
            events.append(Event(sentence, float(k), k + 1.0, action, alternatives))
    assert len(events) >= 20
    checked = 0
    for _ in range(500):
        a, b = rng.choice(len(events), 2, replace=False)
        item = CompItem("v", "v.mp4", 100.0, (events[a], events[b]))
        new = replaced_events(item, rng)
        (old_event, new_event), = [(o, n) for o, n in zip(item.events, new, strict=True) if o.text != n.text]
        words_old, words_new = old_event.text.split(), new_event.text.split()
        (i,) = [j for j, (x, y) in enumerate(zip(words_old, words_new, strict=True)) if x != y]
        word, replacement = words_old[i].strip(".,"), words_new[i].strip(".,")
        tag = penn_tag(word)
        lemmas = getAllLemmas(replacement.lower(), upos="VERB").get("VERB", ())
        assert any(replacement.lower() in getInflection(lemma, tag=tag, inflect_oov=False) for lemma in lemmas), \
            (word, replacement)
        nxt = words_old[i + 1].lower().strip(".,") if i + 1 < len(words_old) else ""
        needed = {8, 9, 10, 11} if nxt in OBJECT_OPENERS else {1, 2}
        assert any(verb_frames(lemma) & needed for lemma in lemmas), (word, replacement, nxt)
        assert replacement.lower() not in {"carrys", "puting", "siting"}
        checked += 1
    assert checked == 500
    assert key_action("A man is seen standing in a field.")[0] == "standing"
    assert "putting" not in key_action("A man is seen standing in a field.")[1]  # "put" needs an object
    assert "carries" in key_action("The man throws the ball to a dog.")[1]
