"""Character-level text shifts on real MSR-VTT captions (spec/text-perturbations.md §2, §3, §7)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from tests.shifts.text.text_captions import msrvtt_captions
from tta.shifts import item_seed, perturb_text, text_shift_names
from tta.shifts.text import HATVTR_TEXT_SHIFTS

CHAR = ["ocr", "char_insert", "char_replace", "char_swap", "char_delete"]
EXTRA = ["keyboard", "spelling_error", "typos"]


def expected_words(caption: str, severity: int, min_char: int) -> int:
    """n_w = clamp(⌈r·n_tokens⌉, 1, 10), capped by the eligible tokens (§3)."""
    tokens = caption.split()
    n = min(max(1, math.ceil(0.05 * severity * len(tokens))), 10)
    return min(n, sum(len(t) >= min_char for t in tokens))


def changed_words(a: str, b: str) -> int:
    wa, wb = a.split(), b.split()
    assert len(wa) == len(wb), (a, b)
    return sum(x != y for x, y in zip(wa, wb, strict=True))


def test_registered_with_severities():
    names = text_shift_names()
    for name in CHAR + EXTRA:
        assert name in names
    assert set(HATVTR_TEXT_SHIFTS) <= set(names) | {"back_translation", "formal", "casual", "passive", "active"}
    with pytest.raises(ValueError, match="severity 8 is out of range"):
        perturb_text("a man is cooking", "ocr", 8, 0)
    with pytest.raises(ValueError, match="severity 0 is out of range"):
        perturb_text("a man is cooking", "char_swap", 0, 0)


@pytest.mark.parametrize("name", CHAR + EXTRA)
def test_deterministic_per_seed_order_independent_no_global_leak(name):
    caps = msrvtt_captions(40)
    seeds = [item_seed(42, cid, name, 7) for cid, _ in caps]
    first = [perturb_text(c, name, 7, s) for (_, c), s in zip(caps, seeds, strict=True)]
    random.seed(123)
    np.random.seed(123)
    expect_py, expect_np = random.random(), np.random.rand()
    random.seed(123)
    np.random.seed(123)
    for other in ("char_insert", "ocr", "keyboard"):  # other shifts run in between, in another order
        perturb_text(caps[0][1], other, 3, 99)
    again = [perturb_text(c, name, 7, s) for (_, c), s in reversed(list(zip(caps, seeds, strict=True)))][::-1]
    assert (random.random(), np.random.rand()) == (expect_py, expect_np), "global RNG state leaked"
    assert first == again
    assert sum(a != c for a, (_, c) in zip(first, caps, strict=True)) >= 30  # it does perturb
    other = [perturb_text(c, name, 7, s + 1) for (_, c), s in zip(caps, seeds, strict=True)]
    assert other != first


@pytest.mark.parametrize("name", ["char_insert", "char_delete"])
def test_edit_rate_is_the_word_ratio(name):
    """Insert/delete always change a chosen word: exactly n_w words change (§3), r = 0.05·s."""
    caps = msrvtt_captions(300)
    rates = []
    for s in (1, 3, 5, 7):
        got = exp = 0
        for cid, c in caps:
            k = changed_words(c, perturb_text(c, name, s, item_seed(42, cid, name, s)))
            assert k == expected_words(c, s, 4), (c, s)
            got, exp = got + k, exp + len(c.split())
        rates.append(got / exp)
    assert rates == sorted(rates) and rates[0] < rates[-1]
    # n_w = ⌈r·n⌉ (at least 1) of n tokens: the rate sits just above r where enough words have ≥ 4 characters
    assert 0.35 <= rates[-1] <= 0.5 and 0.1 <= rates[0] <= 0.2


@pytest.mark.parametrize("name,min_char", [("char_replace", 4), ("char_swap", 4), ("ocr", 1)])
def test_other_char_types_change_at_most_n_words(name, min_char):
    caps = msrvtt_captions(200)
    totals = []
    for s in (1, 7):
        got = exp = 0
        for cid, c in caps:
            k = changed_words(c, perturb_text(c, name, s, item_seed(42, cid, name, s)))
            e = expected_words(c, s, min_char)
            assert k <= e
            got, exp = got + k, exp + e
        totals.append(got / exp)
    # substitute/swap may leave a word equal by chance (same char drawn, "ll" swapped); OCR only maps some chars
    floor = 0.4 if name == "ocr" else 0.85
    assert all(t >= floor for t in totals), totals


def test_ocr_uses_the_ocr_map():
    out = perturb_text("oooo ssss llll zzzz", "ocr", 7, 1)
    assert set(out.replace(" ", "")) <= set("osl z0u81 2".replace(" ", "") + "z")


def test_empty_caption_is_kept():
    assert perturb_text("", "char_insert", 7, 0) == ""
