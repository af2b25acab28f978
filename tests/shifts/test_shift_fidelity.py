"""A run reports the implementation that actually ran (tta.shifts.registry.implementation_record): approximations
under their own names, snow through ImageMagick, event insertion's middle layout and donor query source, the
agentless voice change of active_approx, the changed share of text shifts, and mlvp.apply_at."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from tests.shifts.video.video_shift_env import textured_clip
from tta.shifts import item_seed, perturb_text, perturb_video, text_shift_names, video_shift_names
from tta.shifts.registry import implementation_record
from tta.shifts.video.weather import wand_available

CONF = Path(__file__).resolve().parents[2] / "conf" / "shift"
need_wand = pytest.mark.skipif(not wand_available(), reason="Wand / libmagickwand not installed (make setup)")


def test_every_hydra_choice_is_its_shift_name():
    from omegaconf import OmegaConf

    names = set(video_shift_names()) | set(text_shift_names()) | {"clean", "mixed_severity", "mixed_types"}
    for file in sorted(CONF.glob("*.yaml")):
        name = OmegaConf.load(file).name
        assert name == file.stem, f"{file.name} runs {name!r}"
        assert name in names
    for name in set(video_shift_names()) | set(text_shift_names()):
        assert (CONF / f"{name}.yaml").is_file(), f"shift {name!r} has no Hydra choice"


def test_approximations_are_reported_under_their_own_names():
    from tta.utils.config import compose

    for choice in ("style_transfer_approx", "snow_approx", "active_approx", "formal_approx", "back_translation_approx"):
        shift = compose("run", [f"shift={choice}"]).shift
        rec = implementation_record(shift)
        assert rec["name"] == choice and rec["faithful"] is False
        assert rec["approximates"] == choice.removesuffix("_approx") and rec["note"]
    rec = implementation_record(compose("run", ["shift=style_transfer_approx"]).shift)
    assert rec["options"]["style_source"] == "procedural" and rec["options"]["apply_at"] == "native"


def test_style_transfer_is_adain_and_fails_in_one_line_without_weights(tmp_path):
    from tta.utils.config import compose

    shift = compose("run", ["shift=style_transfer"]).shift
    assert shift.name == "style_transfer"
    for call in (lambda: implementation_record(shift),
                 lambda: perturb_video(textured_clip(t=2), "style_transfer", 3, 0, **shift.options)):
        with pytest.raises(ValueError) as err:
            call()
        msg = str(err.value)
        assert "\n" not in msg and "shift.options.weights_dir" in msg and "shift=style_transfer_approx" in msg
    with pytest.raises(FileNotFoundError, match="AdaIN weights .* not found"):  # a directory without the weights
        implementation_record({"name": "style_transfer", "severity": 3, "options": {"weights_dir": str(tmp_path)}})
    for name in ("vgg_normalised.pth", "decoder.pth"):
        (tmp_path / name).write_bytes(b"")
    rec = implementation_record({"name": "style_transfer", "severity": 3, "options": {"weights_dir": str(tmp_path)}})
    assert rec["faithful"] is True and rec["name"] == "style_transfer" and rec["options"]["weights_dir"] == str(tmp_path)


@need_wand
def test_snow_runs_imagemagick_and_records_it():
    from tta.utils.config import compose

    shift = compose("run", ["shift=snow"]).shift
    rec = implementation_record(shift)
    assert rec["name"] == "snow" and rec["faithful"] is True
    assert rec["options"]["blur_impl"] == "imagemagick" and "ImageMagick" in rec["options"]["imagemagick_version"]
    approx = implementation_record(compose("run", ["shift=snow_approx"]).shift)
    assert approx["name"] == "snow_approx" and approx["faithful"] is False and approx["options"]["blur_impl"] == "taps"
    # same item seed (SEED_ALIASES), same curtain and angle: the two differ only by the blur (<= 1 grey level)
    clip = textured_clip(t=4, h=40, w=56)
    for severity in (1, 3, 5):
        assert item_seed(1, "v", "snow", severity) == item_seed(1, "v", "snow_approx", severity)
        seed = item_seed(1, "v", "snow", severity)
        a = perturb_video(clip, "snow", severity, seed).int()
        b = perturb_video(clip, "snow_approx", severity, seed).int()
        assert (a - b).abs().max() <= 2 and (a == b).float().mean() > 0.95
    with pytest.raises(ValueError, match="shift=snow_approx"):
        perturb_video(clip, "snow", 3, 0, blur_impl="taps")


def test_snow_without_the_library_runs_imagemagicks_arithmetic_and_wand_names_the_fix(monkeypatch):
    import tta.shifts.video.weather as weather

    clip = textured_clip(t=2)
    expect = perturb_video(clip, "snow", 3, 0)
    monkeypatch.setattr(weather, "wand_available", lambda: False)
    assert torch.equal(perturb_video(clip, "snow", 3, 0), expect)  # the default needs no library
    rec = implementation_record({"name": "snow", "severity": 3, "options": {}})
    assert rec["faithful"] is True and rec["options"]["blur_impl"] == "imagemagick"
    with pytest.raises(ImportError) as err:
        perturb_video(clip, "snow", 3, 0, blur_impl="wand")
    assert "blur_impl=imagemagick" in str(err.value) and "\n" not in str(err.value)
    assert perturb_video(clip, "snow_approx", 3, 0).shape == (2, 48, 64, 3)


def test_mixed_stream_lists_its_components():
    rec = implementation_record({"name": "mixed_types", "options": {"ratio": 0.4, "types": ["gaussian", "snow_approx",
                                                                                           "style_transfer_approx"]}})
    assert set(rec["components"]) == {"gaussian", "snow_approx", "style_transfer_approx"}
    assert rec["faithful"] is False and rec["components"]["gaussian"]["faithful"] is True


# ------------------------------------------------------------------------------------------- event insertion


class _ConstantPool:
    """A donor pool whose donor frames all have the value 200."""

    def donor_frames(self, video_id, k, query):
        return torch.full((k, 20, 30, 3), 200, dtype=torch.uint8)


def _index_clip(f: int = 12) -> torch.Tensor:
    return torch.arange(f, dtype=torch.uint8)[:, None, None, None].expand(f, 8, 10, 3).contiguous()


@pytest.mark.parametrize("severity", [1, 2, 3, 4, 5])
def test_event_insertion_middle_layout_on_an_index_clip(severity):
    from tta.shifts.video.common import ShiftContext
    from tta.shifts.video.event import donor_frame_count

    clip = _index_clip()
    ctx = ShiftContext(video_id="q", resources={"donor_pool": _ConstantPool()})
    k = donor_frame_count(12, severity)
    rest = 12 - k
    head, tail = -(-rest // 2), rest // 2
    expect = list(range(head)) + [200] * k + list(range(12 - tail, 12))
    out = perturb_video(clip, "event_insertion", severity, 0, context=ctx, position="middle")
    assert out[:, 0, 0, 0].tolist() == expect
    if severity == 1:  # k = 4: [0..3, D x4, 8..11]
        assert expect == [0, 1, 2, 3, 200, 200, 200, 200, 8, 9, 10, 11]
    tail_out = perturb_video(clip, "event_insertion", severity, 0, context=ctx, position="tail")
    assert tail_out[:, 0, 0, 0].tolist() == list(range(rest)) + [200] * k


def test_donor_query_source_is_recorded_and_defaults_to_the_video_embedding():
    from types import SimpleNamespace

    from tta.data.shift_resources import query_sources

    pairs = [SimpleNamespace(video_id=v, caption=f"caption {v}") for v in ("a", "b", "c")]
    objects = {"a": {"video_caption": "generated"}, "b": {}}
    assert query_sources(pairs, objects, "caption_text") == {"a": "generated_caption", "b": "video_embedding",
                                                             "c": "video_embedding"}
    assert set(query_sources(pairs, objects, "video").values()) == {"video_embedding"}
    spec = SimpleNamespace(name="event_insertion", severity=5, seed=0, options=(("position", "middle"),),
                           resources={"donor_query_source": {"generated_caption": 1, "video_embedding": 2}})
    rec = implementation_record(spec)
    assert rec["faithful"] and rec["options"]["position"] == "middle" and rec["options"]["caption_fallback"] == "video"
    assert rec["donor_query_source"] == {"generated_caption": 1, "video_embedding": 2}
    assert rec["donor_query_optimistic"] is False


def test_no_donor_is_chosen_with_the_query_ground_truth_caption():
    """The embedded benchmark writes each test video's own caption as its "generated" caption (tta/synth/build.py);
    taken as the donor query it picked the train clip that best matched the answer and event insertion raised v2t
    R@1 above clean. Such a caption must not form the query, and no pool video carrying it may be the donor."""
    from types import SimpleNamespace

    from tta.data.shift_resources import answer_donors, query_sources
    from tta.shifts.video.donors import DonorPool

    pairs = [SimpleNamespace(video_id="t0", caption="a red ball bounces and then turns blue"),
             SimpleNamespace(video_id="t1", caption="a tiny green box slides left")]
    # as tta/synth/build.py writes it: video_caption = the test pair's own caption (case and full stop aside)
    objects = {"t0": {"video_caption": "A red ball bounces and then turns blue."},
               "t1": {"video_caption": "a green square moves to the left"}}
    assert query_sources(pairs, objects, "caption_text") == {"t0": "video_embedding", "t1": "generated_caption"}
    pool_captions = [{"a red ball bounces and then turns blue", "a scarlet disc hops around"}, {"something else"},
                     {"a tiny green box slides left"}]
    excluded = answer_donors(pairs, pool_captions)
    assert excluded == {"t0": [0], "t1": [2]}
    emb = torch.tensor([[10.0, 0.0], [1.0, 0.0], [0.0, 10.0]])  # the answer's clip scores highest for both
    pool = DonorPool(["p0.mp4", "p1.mp4", "p2.mp4"], ["p0", "p1", "p2"], emb,
                     {"video": {"t0": torch.tensor([1.0, 0.0]), "t1": torch.tensor([0.0, 1.0])}}, excluded=excluded)
    assert pool.plan(["t0", "t1"], "video") == {"t0": "p1", "t1": "p0"}
    unguarded = DonorPool(pool.paths, pool.ids, emb, pool.queries)  # what the pool chose before the exclusion
    assert unguarded.plan(["t0", "t1"], "video") == {"t0": "p0", "t1": "p2"}
    with pytest.raises(ValueError, match="every pool video is excluded"):
        DonorPool(["p0.mp4"], ["p0"], emb[:1], {"video": {"t0": torch.tensor([1.0, 0.0])}},
                  excluded={"t0": [0]}).donor_index("t0", "video")


def test_ground_truth_caption_fallback_is_refused():
    from tta.data.shift_resources import build_donor_pool

    with pytest.raises(ValueError, match="caption_fallback must be video"):
        build_donor_pool(None, None, [], None, None, 0, {"caption_fallback": "ground_truth", "pool_size": 1}, {})


# ------------------------------------------------------------------------------------------- text shifts

PASSIVES = {
    "a ball is kicked by a man": "a man kicks a ball",
    "the balls are kicked by two men": "two men kick the balls",
    "the car was driven by a woman": "a woman drove the car",
    "food is being cooked by a chef": "a chef is cooking food",
    "a song is sung by a girl on stage": "a girl sings a song on stage",
    "a car is picked up by a truck": "a truck picks up a car",
    "a video game is played": "someone plays a video game",
    "cheese is being sliced": "someone is slicing cheese",
    "a salad in a bowl is being filmed on a table": "someone is filming a salad in a bowl on a table",
    "a woman is interviewed on a tv talk show": "someone interviews a woman on a tv talk show",
}
UNCHANGED = ["a man is kicking a ball", "a man dressed in red is dancing", "tennis players are involved in matches"]


def test_active_approx_converts_constructed_passive_captions():
    off = {"filter_enabled": False}
    for passive, active in PASSIVES.items():
        assert perturb_text(passive, "active_approx", 1, 0, **off) == active, passive
    for caption in UNCHANGED:
        assert perturb_text(caption, "active_approx", 1, 0, **off) == caption


def test_text_record_carries_the_changed_share():
    captions = [(c, f"id{i}") for i, c in enumerate([*PASSIVES, *UNCHANGED])]
    spec = {"name": "active_approx", "severity": 1, "seed": 42, "options": {"filter_enabled": False}}
    rec = implementation_record(spec, captions)
    assert rec["name"] == "active_approx" and rec["faithful"] is False and rec["num_captions"] == len(captions)
    assert rec["changed_share"] == pytest.approx(len(PASSIVES) / len(captions))
    assert implementation_record(spec)["changed_share"] is None  # no captions given
    # the share is that of the stream's own outputs (same item seeds)
    cs = [("a man is driving a car", "x"), ("two dogs run", "y")]
    rec = implementation_record({"name": "char_swap", "severity": 7, "seed": 3, "options": {}},
                                cs)
    outs = [perturb_text(c, "char_swap", 7, item_seed(3, i, "char_swap", 7)) for c, i in cs]
    assert rec["changed_share"] == sum(o != c for o, (c, _) in zip(outs, cs, strict=True)) / 2


def test_model_based_text_shifts_need_a_model_and_record_deviations(tmp_path):
    from tta.utils.config import compose

    for name in ("active", "formal", "back_translation"):
        shift = compose("run", [f"shift={name}", "task=t2v"]).shift
        assert shift.name == name
        with pytest.raises(ValueError, match=f"shift={name}_approx"):
            implementation_record(shift)
    rec = implementation_record({"name": "formal", "severity": 1, "options": {"model_path": str(tmp_path)}})
    assert rec["faithful"] and "adequacy" in rec["deviation"]


def test_memoised_text_shift_advances_a_shared_generator_as_before():
    import random

    from tta.shifts.registry import get_shift

    fn = get_shift("char_swap").fn
    a, b = random.Random(5), random.Random(5)
    first = [fn(t, 7, a) for t in ("a man is driving a car", "two dogs run in a park")]
    again = [fn(t, 7, b) for t in ("a man is driving a car", "two dogs run in a park")]  # memo hits
    assert first == again and a.getstate() == b.getstate()


# ------------------------------------------------------------------------------------------- apply_at


def test_apply_at_canonical_shifts_the_224_frame_and_native_is_the_default():
    clip = textured_clip(t=3, h=120, w=160)
    native = perturb_video(clip, "gaussian", 3, 1)
    assert torch.equal(native, perturb_video(clip, "gaussian", 3, 1, apply_at="native"))
    canon = perturb_video(clip, "gaussian", 3, 1, apply_at="canonical")
    assert native.shape == clip.shape and canon.shape == (3, 224, 224, 3)
    with pytest.raises(ValueError, match="apply_at"):
        perturb_video(clip, "gaussian", 3, 1, apply_at="resized")
    small = perturb_video(clip, "fog", 2, 1, apply_at="canonical", canonical_size=64)
    assert small.shape == (3, 64, 64, 3)


def test_apply_at_canonical_maps_the_occlusion_box():
    from tests.shifts.video.video_shift_env import main_objects
    from tta.shifts.video.common import ShiftContext

    clip = torch.full((2, 100, 200, 3), 255, dtype=torch.uint8)  # short side 100 -> 224, long 448 -> crop 112..336
    box = [100, 25, 150, 75]  # native: the centre of the frame
    ctx = ShiftContext(video_id="v", frame_indices=[0, 1], main_objects=main_objects([0, 1], box=box))
    out = perturb_video(clip, "main_object_occlusion", 5, 0, context=ctx, apply_at="canonical").numpy()
    black = np.argwhere(out[0, :, :, 0] == 0)
    y0, x0 = black.min(0)
    y1, x1 = black.max(0)
    # mapped box: x 100*2.24-112 = 112 .. 224, y 56 .. 168 (the patch lies inside it)
    assert 112 <= x0 and x1 <= 224 and 56 <= y0 and y1 <= 168
