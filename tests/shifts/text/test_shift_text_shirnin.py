"""Shirnin et al.'s word-level text shifts (tta/shifts/text/shirnin.py): U.K. <-> U.S. spelling on hand-written
examples both ways, the shipped spelling table against its rules, slang and Yoda on constructed captions, severity
as a share of units, determinism per item seed."""

from __future__ import annotations

import pytest

from tests.shifts.text.text_captions import need_wordnet
from tta.shifts import item_seed, perturb_text
from tta.shifts.registry import get_shift
from tta.shifts.text.shirnin import SPELLING_TABLE, slang_lexicon, slang_matches, spelling_table
from tta.tools.spelling_table import NEVER, generate

NAMES = ("uk_us_spelling_approx", "slang_approx", "yoda_approx")


def run(text: str, name: str, severity: int = 5, seed: int = 0, **options) -> str:
    return perturb_text(text, name, severity, item_seed(seed, "c1", name, severity), **options)


def test_registered_with_five_severities():
    for name in NAMES:
        info = get_shift(name)
        assert info.kind == "text" and info.severities == (1, 2, 3, 4, 5) and info.level == "word"


def test_shipped_table_is_the_rule_output():
    lines = SPELLING_TABLE.read_text().splitlines()
    assert lines[0] == "us\tuk\trule"
    assert [tuple(line.split("\t")) for line in lines[1:]] == generate()
    to_uk, to_us = spelling_table()
    assert len(to_uk) >= 300 and not set(to_uk) & set(to_us)
    assert not (set(to_uk) | set(to_us)) & NEVER
    assert {r for _, _, r in generate()} == {"our", "ise", "yse", "re", "ogue", "ll", "l", "word"}


@pytest.mark.parametrize(("us", "uk"), [
    ("color", "colour"), ("favorite", "favourite"), ("neighborhood", "neighbourhood"), ("organize", "organise"),
    ("organization", "organisation"), ("analyzing", "analysing"), ("center", "centre"), ("centered", "centred"),
    ("theater", "theatre"), ("catalog", "catalogue"), ("cataloging", "cataloguing"), ("traveling", "travelling"),
    ("modeled", "modelled"), ("traveler", "traveller"), ("fulfill", "fulfil"), ("enrollment", "enrolment"),
    ("gray", "grey"), ("airplane", "aeroplane"), ("maneuvering", "manoeuvring"), ("jewelry", "jewellery"),
    ("mom", "mum"), ("defense", "defence"), ("judgment", "judgement"),
])
def test_spelling_pairs_both_ways(us, uk):
    assert run(f"a {us} here", "uk_us_spelling_approx", direction="us_to_uk") == f"a {uk} here"
    assert run(f"a {uk} here", "uk_us_spelling_approx", direction="uk_to_us") == f"a {us} here"
    assert run(f"a {us} here", "uk_us_spelling_approx") == f"a {uk} here"
    assert run(f"a {uk} here", "uk_us_spelling_approx") == f"a {us} here"
    assert run(f"a {us} here", "uk_us_spelling_approx", direction="uk_to_us") == f"a {us} here"  # already US


def test_spelling_keeps_case_punctuation_and_the_words_it_must_not_touch():
    assert run("The Gray COLOR, centered.", "uk_us_spelling_approx") == "The Grey COLOUR, centred."
    keep = "a man advises on the size of the prize and the meter of the tire at the program"
    assert run(keep, "uk_us_spelling_approx") == keep
    with pytest.raises(ValueError, match="direction"):
        run("a color", "uk_us_spelling_approx", direction="sideways")


def test_severity_is_the_share_of_convertible_words():
    caption = "the gray color of the theater center near the favorite neighborhood"  # 6 convertible words
    for severity, k in ((1, 2), (2, 3), (3, 4), (4, 5), (5, 6)):  # ⌈0.2·s·6⌉
        for seed in range(3):
            out = run(caption, "uk_us_spelling_approx", severity, seed)
            assert sum(a != b for a, b in zip(out.split(), caption.split(), strict=True)) == k


def test_slang_on_constructed_captions():
    need_wordnet()
    assert run("people are going to eat food", "slang_approx") == "peeps are gonna eat grub"
    assert run("a man is going to the store", "slang_approx") == "a dude is going to the store"  # no verb after "to"
    assert run("A little girl and her friends.", "slang_approx") == "A lil lass and her buddies."
    assert run("a cat sleeps on a mat", "slang_approx") == "a cat sleeps on a mat"
    assert 60 <= len(slang_lexicon()) <= 100
    assert [m[2] for m in slang_matches("a police officer talks to you".split())] == ["cop", "u"]


def test_slang_severity_one_converts_a_share():
    need_wordnet()
    caption = "the man and the woman and the boy and the girl and the kid"  # 5 matches
    outs = {run(caption, "slang_approx", 1, seed) for seed in range(6)}
    assert all(sum(a != b for a, b in zip(o.split(), caption.split(), strict=True)) == 1 for o in outs)
    assert len(outs) > 1  # which one is the item seed's choice


def test_yoda_on_constructed_captions():
    need_wordnet()
    assert run("a man is playing a guitar", "yoda_approx") == "playing a guitar, a man is"
    assert run("A girl rides a horse.", "yoda_approx") == "A horse, a girl rides."
    assert run("a woman has been cooking pasta", "yoda_approx") == "cooking pasta, a woman has been"
    assert run("a man and a woman are dancing", "yoda_approx") == "dancing, a man and a woman are"
    assert run("someone is singing and dancing", "yoda_approx") == "singing and dancing, someone is"
    two = "a man is singing and a woman plays the piano"
    assert run(two, "yoda_approx") == "singing, a man is and the piano, a woman plays"
    one = {run(two, "yoda_approx", 1, seed) for seed in range(8)}  # ⌈0.2·2⌉ = 1 of the two clauses
    assert one == {"singing, a man is and a woman plays the piano", "a man is singing and the piano, a woman plays"}
    assert run("a red car", "yoda_approx") == "a red car"  # no verb: nothing to flip


@pytest.mark.parametrize("name", NAMES)
def test_deterministic_per_item_seed(name):
    need_wordnet()
    caption = "a man is going to paint the gray center of the theater and a girl watches the colorful show"
    for severity in (1, 3, 5):
        outs = [perturb_text(caption, name, severity, item_seed(7, c, name, severity)) for c in ("a", "a", "b")]
        assert outs[0] == outs[1] and outs[0] != caption


@pytest.mark.parametrize("name", NAMES)
def test_recorded_as_approximations_seeded_as_the_papers_shift(name):
    from tta.shifts import item_seed
    from tta.shifts.registry import implementation_record

    record = implementation_record({"name": name, "severity": 5})
    paper = name.removesuffix("_approx")
    assert record["faithful"] is False and record["approximates"] == paper and record["note"]
    assert item_seed(0, "c1", name, 3) == item_seed(0, "c1", paper, 3)  # runs under the old names stay comparable
