"""Schiappa et al. text perturbations: POS-based drops on hand-tagged captions, Bias, AddText, Positional."""

from __future__ import annotations

import pytest

from tests.shifts.text.text_captions import msrvtt_captions, need_wordnet
from tta.shifts import item_seed, perturb_text
from tta.shifts.text.pos import pos_tag
from tta.shifts.text.schiappa import ADVERBS, IRRELEVANT_PHRASES

# Hand-tagged MSR-VTT test captions (Penn classes: NN* nouns, VB* verbs incl. auxiliaries): (caption, NN, VB)
HAND_TAGGED = [
    ("a little girl does gymnastics", {"girl", "gymnastics"}, {"does"}),
    ("a man is giving a review on a vehicle", {"man", "review", "vehicle"}, {"is", "giving"}),
    ("a woman creating a fondant baby and flower", {"woman", "fondant", "baby", "flower"}, {"creating"}),
    ("two men discuss social issues", {"men", "issues"}, {"discuss"}),
    ("a naked child runs through a field", {"child", "field"}, {"runs"}),
    ("people are singing on the beach", {"people", "beach"}, {"are", "singing"}),
    ("a woman holds up a leather jacket", {"woman", "leather", "jacket"}, {"holds"}),
    ("a reporter asks questions at a gun range", {"reporter", "questions", "gun", "range"}, {"asks"}),
    ("a man with a very red nose", {"man", "nose"}, set()),
    ("cartoon show for kids", {"cartoon", "show", "kids"}, set()),
    ("some people cross a street in a busy road", {"people", "street", "road"}, {"cross"}),
    ("a student explains to his teacher about the sheep of another student",
     {"student", "teacher", "sheep"}, {"explains"}),
    ("models are walking down a short runway", {"models", "runway"}, {"are", "walking"}),
    ("a young girl in a horror movie is haunted", {"girl", "horror", "movie"}, {"is", "haunted"}),
    ("a girl and a man are talking to each other", {"girl", "man"}, {"are", "talking"}),
    ("a child in pink watches a white bird in an open box", {"child", "pink", "bird", "box"}, {"watches"}),
    ("baseball player hits ball", {"baseball", "player", "ball"}, {"hits"}),
    ("a man is talking on stage", {"man", "stage"}, {"is", "talking"}),
]


@pytest.fixture(scope="module", autouse=True)
def _wordnet():
    need_wordnet()


def classes(caption: str, nn: set[str], vb: set[str]) -> tuple[list[bool], list[bool]]:
    words = caption.split()
    return [w in nn for w in words], [w in vb for w in words]


@pytest.mark.parametrize("caption,nn,vb", HAND_TAGGED)
def test_tagger_agrees_with_hand_tags(caption, nn, vb):
    tags = pos_tag(caption.split())
    is_nn, is_vb = classes(caption, nn, vb)
    assert [t == "NOUN" for t in tags] == is_nn, list(zip(caption.split(), tags, strict=True))
    assert [t in ("VERB", "AUX") for t in tags] == is_vb, list(zip(caption.split(), tags, strict=True))


@pytest.mark.parametrize("caption,nn,vb", HAND_TAGGED)
def test_drops_remove_exactly_that_class(caption, nn, vb):
    words = caption.split()
    is_nn, is_vb = classes(caption, nn, vb)

    def drop(flags):
        return " ".join("[UNK]" if f else w for w, f in zip(words, flags, strict=True))

    def only(flags):
        return " ".join(w for w, f in zip(words, flags, strict=True) if f) or "[UNK]"

    assert perturb_text(caption, "drop_nn", 1, 0) == drop(is_nn)
    assert perturb_text(caption, "drop_vb", 1, 0) == drop(is_vb)
    assert perturb_text(caption, "drop_vbnn", 1, 0) == drop([a or b for a, b in zip(is_nn, is_vb, strict=True)])
    assert perturb_text(caption, "only_nn", 1, 0) == only(is_nn)
    assert perturb_text(caption, "only_vb", 1, 0) == only(is_vb)
    assert perturb_text(caption, "only_nnvb", 1, 0) == only([a or b for a, b in zip(is_nn, is_vb, strict=True)])
    marked = perturb_text(caption, "only_nn", 1, 0, mark_dropped=True)
    assert marked == drop([not f for f in is_nn])
    rand = perturb_text(caption, "rand_nn", 1, 3).split()
    changed = [i for i, (a, b) in enumerate(zip(words, rand, strict=True)) if a != b]
    assert len(changed) == 1 and is_nn[changed[0]] and rand[changed[0]] == "[UNK]"


def test_paper_example():
    assert perturb_text("a little girl does gymnastics", "drop_nn", 1, 0) == "a little [UNK] does [UNK]"
    outs = {perturb_text("a little girl does gymnastics", "rand_nn", 1, s) for s in range(20)}
    assert outs == {"a little [UNK] does gymnastics", "a little girl does [UNK]"}


def test_positional():
    c = "a man is talking on stage"
    assert perturb_text(c, "drop_first", 1, 0) == "[UNK] man is talking on stage"
    assert perturb_text(c, "drop_last", 1, 0) == "a man is talking on [UNK]"
    assert perturb_text(c, "drop_first_last", 1, 0) == "[UNK] man is talking on [UNK]"
    assert perturb_text("hello", "drop_first_last", 1, 0) == "[UNK]"
    for cid, cap in msrvtt_captions(50):
        s = item_seed(42, cid, "shuffle_order", 1)
        out = perturb_text(cap, "shuffle_order", 1, s)
        assert sorted(out.split()) == sorted(cap.split()) and out == perturb_text(cap, "shuffle_order", 1, s)


def test_gender():
    c = "a woman is talking to her son about her work"
    assert perturb_text(c, "gender_male", 1, 0) == "a man is talking to his son about his work"
    assert perturb_text(c, "gender_female", 1, 0) == "a woman is talking to her daughter about her work"
    assert perturb_text(c, "gender_swap", 1, 0) == "a man is talking to his daughter about his work"
    assert perturb_text(c, "gender_neutral", 1, 0) == "a person is talking to their child about their work"
    assert perturb_text("he plays football with her", "gender_swap", 1, 0) == "she plays football with him"
    assert perturb_text("she is happy and he runs", "gender_neutral", 1, 0) == "they are happy and they run"
    # on the real captions: male words vanish under gender_female, and nothing else changes
    from tta.shifts.text.gender import MALE_WORDS

    for _, cap in msrvtt_captions(200):
        out = perturb_text(cap, "gender_female", 1, 0).split()
        assert not set(out) & MALE_WORDS
        assert len(out) == len(cap.split())


def test_addtext():
    for cid, cap in msrvtt_captions(30):
        s = item_seed(42, cid, "x", 1)
        out = perturb_text(cap, "add_irrelevant_phrase", 1, s)
        assert out.startswith(cap + " ") and out[len(cap) + 1:] in IRRELEVANT_PHRASES
        adv = perturb_text(cap, "insert_adverb", 1, s).split()
        extra = [w for w in adv if w in ADVERBS and w not in cap.split()]
        assert len(adv) == len(cap.split()) + 1 and len(extra) == 1
    assert perturb_text("a man is driving a car", "insert_adverb", 1, 4).split()[3] in ADVERBS


def test_wordnet_missing_names_the_debian_packages(monkeypatch, tmp_path):
    import nltk

    from tta.shifts.text import wordnet as wn

    monkeypatch.setenv("WNSEARCHDIR", str(tmp_path))
    monkeypatch.setattr(wn, "SEARCH_DIRS", (str(tmp_path / "none"),))
    monkeypatch.setattr(nltk.data, "path", [str(tmp_path)])
    with pytest.raises(wn.WordNetMissingError, match="wordnet-base and wordnet-sense-index"):
        wn.find_wordnet_dir()
