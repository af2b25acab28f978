"""Sentence-level text shifts: rule-based approximations, the local-model hook and the Hydra choices."""

from __future__ import annotations

import pytest

from tests.shifts.text.text_captions import msrvtt_captions, need_wordnet
from tta.shifts import item_seed, perturb_text, text_shift_names
from tta.shifts.registry import get_shift
from tta.shifts.text import APPROXIMATION, HATVTR_TEXT_SHIFTS, perturb_text_detailed, requires_model
from tta.shifts.text.pos import pos_tag

NOFILTER = {"filter_enabled": False}


@pytest.fixture(scope="module", autouse=True)
def _wordnet():
    need_wordnet()


@pytest.mark.parametrize("src,out", [
    ("a man is driving a car", "a car is being driven by a man"),
    ("a boy plays grand theft auto 5", "grand theft auto 5 is played by a boy"),
    ("two men discuss social issues", "social issues are discussed by two men"),
    ("a woman holds up a leather jacket", "a leather jacket is held up by a woman"),
    ("a woman creating a fondant baby and flower", "a fondant baby and flower being created by a woman"),
    ("he is eating an apple", "an apple is being eaten by him"),
])
def test_passive_rewrites_simple_clauses(src, out):
    assert perturb_text(src, "passive_approx", 1, 0, **NOFILTER) == out


@pytest.mark.parametrize("src,out", [
    ("a song is being sung by a girl", "a girl is singing a song"),
    ("a ball was kicked by the boys", "the boys kicked a ball"),
    ("the view of a boat and the water is blocked by clouds and fog", "clouds and fog block the view of a boat and the water"),
    ("a car driven by a man", "a man driving a car"),
])
def test_active_rewrites_agentive_passives(src, out):
    assert perturb_text(src, "active_approx", 1, 0, **NOFILTER) == out


def test_voice_rules_change_what_they_claim_and_leave_the_rest():
    """On the real captions: a changed output is the claimed rewrite (nouns kept, 'by' added/removed, or the
    agent 'someone' for an agentless passive); an
    unchanged one matched no rule; both are round-trip consistent for simple clauses."""
    n_pass = n_act = 0
    for _cid, cap in msrvtt_captions(300):
        words = cap.split()
        nouns = {w for w, t in zip(words, pos_tag(words), strict=True) if t == "NOUN"}
        p = perturb_text(cap, "passive_approx", 1, 0, **NOFILTER)
        if p != cap:
            n_pass += 1
            assert " by " in f" {p} " and nouns <= set(p.split()), (cap, p)
        a = perturb_text(cap, "active_approx", 1, 0, **NOFILTER)
        if a != cap:
            n_act += 1
            # an agentive passive loses its "by"; an agentless one gets the agent "someone"
            assert ("by" in words or a.startswith("someone ")) and nouns <= set(a.split()), (cap, a)
    assert n_pass >= 60 and n_act >= 1  # captions are mostly progressive clauses, rarely agentive passives
    for src in ("a man is driving a car", "two men discuss social issues", "a boy plays a game"):
        back = perturb_text(perturb_text(src, "passive_approx", 1, 0, **NOFILTER), "active_approx", 1, 0, **NOFILTER)
        assert back == src


def test_formal_and_casual_rules():
    f = perturb_text("a kid can't ride his bike on tv", "formal_approx", 1, 0, **NOFILTER)
    assert f == "A child cannot ride his bicycle on television."
    assert perturb_text("cartoon show for kids", "formal_approx", 1, 0, **NOFILTER) == \
        "There is a cartoon programme for children."
    c = perturb_text("A man is riding a bicycle. ", "casual_approx", 1, 0, **NOFILTER)
    assert c == "a guy's riding a bike"
    assert perturb_text("A man is riding.", "casual_approx", 1, 0, drop_article=True, **NOFILTER) == "guy's riding"
    for _, cap in msrvtt_captions(200):
        f = perturb_text(cap, "formal_approx", 1, 0, **NOFILTER)
        assert f[0].isupper() and f.endswith(".") and f != cap
        c = perturb_text(cap, "casual_approx", 1, 0, **NOFILTER)
        assert c == c.lower() and not c.endswith(".")


def test_back_translation_approx():
    assert perturb_text("a man is riding a horse", "back_translation_approx", 1, 0) == "A man rides a horse."
    assert perturb_text("people are singing and dancing", "back_translation_approx", 1, 0) == \
        "People sing and dance."
    changed = sum(perturb_text(c, "back_translation_approx", 1, 0).rstrip(".").lower() != c
                  for _, c in msrvtt_captions(200))
    assert changed >= 80


def test_style_approximations_use_the_filter_once():
    for _, cap in msrvtt_captions(10):
        o = perturb_text_detailed(cap, "passive_approx", 1, item_seed(42, cap, "p", 1))
        assert o.tries == 1 and o.cosine is not None and (o.passed == (o.cosine >= 0.9))
        assert o.text == (perturb_text(cap, "passive_approx", 1, 0, **NOFILTER) if o.passed else o.text)


def test_registry_and_hydra_choices():
    from tta.utils.config import compose

    names = text_shift_names()
    for approx in APPROXIMATION.values():
        assert approx in names and not requires_model(approx)
    for real in APPROXIMATION:
        assert requires_model(real)
    for hatvtr, severity in HATVTR_TEXT_SHIFTS.items():
        assert compose("run", [f"shift={hatvtr}", "task=t2v"]).shift.name == hatvtr  # the choice is the name
        choice = APPROXIMATION.get(hatvtr, hatvtr)  # the model-based ones run here as their *_approx choice
        cfg = compose("run", [f"shift={choice}", "task=t2v"])
        name = cfg.shift.name
        assert name == choice and cfg.shift.severity == severity
        assert get_shift(name).kind == "text" and severity in get_shift(name).severities
        opts = dict(cfg.shift.options or {})
        if "filter_enabled" in opts:
            opts["filter_enabled"] = False
        out = perturb_text("a man is driving a car", name, severity, 0, **opts)
        assert isinstance(out, str) and out
    for choice in set(names) - set(HATVTR_TEXT_SHIFTS):  # every other registered text shift has its Hydra choice
        cfg = compose("run", [f"shift={choice}"])
        assert cfg.shift.name == choice and cfg.shift.severity in get_shift(choice).severities


def test_real_model_hook_needs_a_path_and_runs_a_local_checkpoint(tmp_path):
    with pytest.raises(ValueError, match="needs shift.options.model_path.*shift=formal_approx"):
        perturb_text("a man is driving a car", "formal", 1, 0)
    with pytest.raises(ValueError, match="set shift.name=passive"):
        perturb_text("a man is driving a car", "passive_approx", 1, 0, model_path=str(tmp_path))
    # a tiny randomly initialised T5 with the MiniLM WordPiece vocabulary, saved locally: the plumbing, not quality
    from transformers import AutoTokenizer, T5Config, T5ForConditionalGeneration

    from tta.models.towers import minilm_path

    tok = AutoTokenizer.from_pretrained(minilm_path())
    cfg = T5Config(vocab_size=len(tok), d_model=16, d_ff=32, d_kv=8, num_layers=1, num_heads=2,
                   decoder_start_token_id=tok.pad_token_id, pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id)
    T5ForConditionalGeneration(cfg).save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    a = perturb_text_detailed("a man is driving a car", "formal", 1, 5, model_path=str(tmp_path), max_length=8,
                              filter_max_tries=3)
    b = perturb_text_detailed("a man is driving a car", "formal", 1, 5, model_path=str(tmp_path), max_length=8,
                              filter_max_tries=3)
    assert a == b and isinstance(a.text, str) and a.tries <= 3
    bt = perturb_text("a man is driving a car", "back_translation", 1, 0, model_path=str(tmp_path),
                      reverse_model_path=str(tmp_path), max_length=8)
    assert isinstance(bt, str) and bt
