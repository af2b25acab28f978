"""What a run records about its shift on the tiny benchmark (tta/data/shift_effect.py): the consistency with the
clean source ranking, the input distance and changed share, the D_q filter (share, exclusion for every method
alike, bad values), gallery_shift (the gallery really perturbed, cached under its own key) and per-category
metrics."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import tiny_overrides
from tta.data.gallery import gallery_key
from tta.data.registry import load_pairs
from tta.data.shift_effect import FILTER_REASON, caption_similarities
from tta.data.stream import ShiftSpec
from tta.metrics.consistency import consistency
from tta.run import run
from tta.scenario import Scenario
from tta.utils.config import compose
from tta.utils.config_rules import ConfigValueError


def _run(cache, tmp_path, name, *extra):
    return run(compose("run", tiny_overrides(cache, "save.sims=true", *extra)), tmp_path / name)


def _tied_with_kth(scores: torch.Tensor, k: int) -> int:
    """How many items beside each row's k-th score share its value (summed over rows)."""
    kth = scores.topk(k, dim=1).values[:, -1:]
    return int((scores == kth).sum()) - scores.shape[0]


def test_consistency_reference_is_the_clean_source_run(tiny_cache, tmp_path):
    clean = _run(tiny_cache, tmp_path, "clean", "task=v2t")
    shifted = _run(tiny_cache, tmp_path, "shifted", "task=v2t", "shift=gaussian", "shift.severity=5")
    assert "consistency" not in clean and "input_change" not in clean  # nothing was shifted
    sims = torch.load(tmp_path / "shifted" / "sims.pt").float()
    reference = torch.load(tmp_path / "clean" / "sims.pt").float()
    expected = consistency(sims, reference)
    got = shifted["consistency"]
    assert got["top1_unchanged"] == pytest.approx(expected["top1_unchanged"])
    # sims.pt is float16: where rounding ties a row's 5th score with others, its top-5 set is ambiguous there, and
    # the run (float32) may keep another of the tied items; each such item can move the overlap by 1 / (Q * 5)
    ambiguous = _tied_with_kth(sims, 5) + _tied_with_kth(reference, 5)
    assert got["top5_overlap"] == pytest.approx(expected["top5_overlap"], abs=ambiguous / (sims.shape[0] * 5) + 1e-6)
    change = shifted["input_change"]["query"]
    assert change["measure"] == "pixel_mean_abs_difference" and change["num_items"] == shifted["num_queries"]
    assert change["changed_share"] == 1.0 and 0.02 < change["distance_mean"] < 0.5  # sigma 0.38 noise, clipped


def test_min_similarity_filter_excludes_the_same_pairs_for_every_method(tiny_cache, tmp_path):
    opts = ("task=t2v", "shift=swap_text", "shift.severity=3", "+shift.options.min_similarity=0.8")
    source = _run(tiny_cache, tmp_path, "source", *opts)
    tent = _run(tiny_cache, tmp_path, "tent", *opts, "adapter=tent")
    cfg = compose("run", tiny_overrides(tiny_cache, "task=t2v"))
    pairs = load_pairs(cfg.data, "test", tiny_cache)
    sim = caption_similarities(pairs, ShiftSpec("swap_text", 3, 42))
    below = {p.caption_id for p, s in zip(pairs, sim.tolist(), strict=True) if s < 0.8}
    assert 0 < len(below) < len(pairs)
    for res in (source, tent):
        record = res["query_filter"]
        assert record["filtered"] == len(below) and record["filtered_share"] == len(below) / len(pairs)
        assert res["num_queries"] == res["num_gallery"] == len(pairs) - len(below)
        assert res["skipped"]["reasons"] == {FILTER_REASON: len(below)}
        assert {s["caption_id"] for s in res["skipped"]["items"]} == below
        kept_distance = res["input_change"]["query"]["distance_mean"]
        assert kept_distance <= 0.2 + 1e-6  # every query left has D_q >= 0.8


@pytest.mark.parametrize(("extra", "message"), [
    (("shift=ocr", "+shift.options.min_similarity=1.5"), "shift.options.min_similarity=1.5"),
    (("shift=ocr", "+shift.options.min_similarity=0"), "shift.options.min_similarity=0"),
    (("task=v2t", "shift=gaussian", "+shift.options.min_similarity=0.8"), "is a video shift"),
    (("shift=ocr", "shift@gallery_shift=ocr"), "gallery of task=t2v holds videos"),
    (("task=v2t", "shift=ocr", "shift@gallery_shift=ocr"), "already shifts the gallery"),
])
def test_bad_filter_and_gallery_shift_settings_are_user_errors(tiny_cache, tmp_path, extra, message):
    with pytest.raises((ConfigValueError, ValueError), match=message):
        _run(tiny_cache, tmp_path, "bad", "task=t2v", *extra)


def _gallery_file(cache, *overrides):
    """The cache file of the gallery a run with ``overrides`` encodes (tta/data/gallery.py key)."""
    cfg = compose("run", tiny_overrides(cache, *overrides))
    scenario = Scenario.from_config(cfg)
    model = scenario.load_model(cfg, cache)
    pairs = load_pairs(cfg.data, "test", cache)  # the tiny test split: every pair usable, one caption per video
    return cache / "gallery" / f"video-{gallery_key(model, cfg.data, 'video', scenario.gallery_shift, pairs)}.pt"


def test_gallery_shift_perturbs_the_gallery_once_under_its_own_key(tiny_cache, tmp_path):
    shifted = ("task=t2v", "shift=ocr", "shift@gallery_shift=gaussian", "gallery_shift.severity=5")
    plain = _run(tiny_cache, tmp_path, "plain", "task=t2v", "shift=ocr")
    clean_file, noisy_file = _gallery_file(tiny_cache, "task=t2v"), _gallery_file(tiny_cache, *shifted)
    assert clean_file != noisy_file and clean_file.exists()
    noisy_file.unlink(missing_ok=True)
    both = _run(tiny_cache, tmp_path, "both", *shifted)
    written = noisy_file.stat().st_mtime_ns
    assert (torch.load(noisy_file) - torch.load(clean_file)).abs().max() > 1e-3  # the gallery really is noisy
    assert both["shifted_side"] == "both" and plain["shifted_side"] == "query"
    assert both["gallery_shift"] == {"name": "gaussian", "severity": 5,
                                     "options": {"apply_at": "native", "temporal_mode": "code"}}
    again = _run(tiny_cache, tmp_path, "again", "task=t2v", "shift=char_swap", *shifted[2:])
    assert noisy_file.stat().st_mtime_ns == written  # read back, not encoded again
    assert both["consistency"]["top1_unchanged"] < plain["consistency"]["top1_unchanged"]
    assert again["consistency"]["top1_unchanged"] < 1.0


def test_categories_of_the_embedded_benchmark(tiny_cache, tmp_path):
    res = _run(tiny_cache, tmp_path, "cat", "task=t2v", "shift=ocr")
    cats = res["by_category"]
    assert len(cats) > 1 and sum(c["num_queries"] for c in cats.values()) == res["num_queries"]
    r1 = sum(c["num_queries"] * c["R@1"] for c in cats.values()) / res["num_queries"]
    assert r1 == pytest.approx(res["retrieval"]["R@1"])


def test_repeated_runs_reuse_the_sentence_encodings_and_the_clean_reference(tiny_cache, tmp_path, monkeypatch):
    """A sweep runs many adapters over the same shifted stream, in one process (Hydra's basic launcher) or one
    process per job (SLURM): the caption distances and the clean reference are computed once, kept in memory and in
    the run cache, and a reused value gives the same record as a fresh one."""
    import shutil

    import tta.data.shift_effect as effect
    import tta.shifts.text.similarity as similarity

    folder = f"shift_effect-{tmp_path.name}"  # this test's own entries: other tests share the tiny cache
    monkeypatch.setattr(effect, "MEMO_FOLDER", folder)
    monkeypatch.setattr(effect, "_MEMO", effect.OrderedDict())
    encoder, calls = similarity.sentence_encoder(), []
    monkeypatch.setattr(similarity, "sentence_encoder", lambda: lambda texts: calls.append(len(texts)) or encoder(texts))
    try:
        first = _run(tiny_cache, tmp_path, "first", "task=t2v", "shift=char_swap")
        encoded = len(calls)
        assert encoded > 0 and len(effect._MEMO) == 2  # the caption distances and the clean reference
        assert sorted(f.name.split("-")[0] for f in (tiny_cache / folder).glob("*.pt")) == ["captions",
                                                                                              "clean_reference"]
        second = _run(tiny_cache, tmp_path, "second", "task=t2v", "shift=char_swap")
        assert len(calls) == encoded and len(effect._MEMO) == 2  # nothing encoded, nothing new
        for block in ("input_change", "consistency"):
            assert second[block] == first[block]
        monkeypatch.setattr(effect, "_MEMO", effect.OrderedDict())  # a new process: read from the cache
        stored = _run(tiny_cache, tmp_path, "stored", "task=t2v", "shift=char_swap")
        assert len(calls) == encoded and len(effect._MEMO) == 2
        assert stored["input_change"] == first["input_change"] and stored["consistency"] == first["consistency"]
        monkeypatch.setattr(effect, "_MEMO", effect.OrderedDict())
        shutil.rmtree(tiny_cache / folder)  # computed again, to the same values
        fresh = _run(tiny_cache, tmp_path, "fresh", "task=t2v", "shift=char_swap")
        assert len(calls) == 2 * encoded
        assert fresh["input_change"] == first["input_change"] and fresh["consistency"] == first["consistency"]
        _run(tiny_cache, tmp_path, "other", "task=t2v", "shift=ocr")  # other captions: encoded, and its own entry
        assert len(calls) > 2 * encoded and len(effect._MEMO) == 3  # the clean reference is shared by both shifts
    finally:
        shutil.rmtree(tiny_cache / folder, ignore_errors=True)
