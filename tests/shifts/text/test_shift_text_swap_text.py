"""SwapText (tta/shifts/text/swap_text.py): the number of swapped words per severity, what a swap inserts (an
embedding neighbour, never a stop word or the word itself), kept punctuation and case, determinism per item seed."""

from __future__ import annotations

import math

import pytest

from tta.shifts import item_seed, perturb_text
from tta.shifts.registry import get_shift
from tta.shifts.text.schiappa import SCHIAPPA_TEXT_CATEGORY
from tta.shifts.text.swap_text import NEIGHBOUR_POOL, neighbours
from tta.shifts.text.word import STOP_WORDS

pytestmark = pytest.mark.heavy  # loads the all-MiniLM-L6-v2 embedding table (about 5 s)

CAPTION = "a man is playing a guitar while a woman sings on the stage"


def run(text: str, severity: int, seed: int = 0, **options) -> str:
    return perturb_text(text, "swap_text", severity, item_seed(seed, "c1", "swap_text", severity), **options)


def test_registered_as_a_word_level_swaptext_shift():
    info = get_shift("swap_text")
    assert info.kind == "text" and info.level == "word" and info.severities == tuple(range(1, 8))
    assert SCHIAPPA_TEXT_CATEGORY["swap_text"] == "SwapText"


def test_neighbours_are_related_content_words():
    near = neighbours("guitar")
    assert len(near) == NEIGHBOUR_POOL and "guitar" not in near and "guitars" not in near
    assert not set(near) & STOP_WORDS and all(w.isalpha() for w in near)
    assert {"bass", "piano", "violin", "drums"} & set(near[:10])  # instruments lie next to a guitar
    assert neighbours("xqzv") == ()


@pytest.mark.parametrize("severity", [1, 3, 5, 7])
def test_swaps_floor_of_ratio_times_words(severity):
    words = CAPTION.split()
    for seed in range(5):
        out = run(CAPTION, severity, seed).split()
        assert len(out) == len(words)
        changed = [(a, b) for a, b in zip(words, out, strict=True) if a != b]
        assert len(changed) == max(1, math.floor(0.05 * severity * len(words) + 1e-9))
        for old, new in changed:
            assert old not in STOP_WORDS and new in neighbours(old)[:10]


def test_top_k_one_takes_the_nearest_neighbour_and_keeps_case_and_punctuation():
    out = run("Guitar.", 1, top_k=1)
    assert out == neighbours("guitar")[0].capitalize() + "."


def test_deterministic_per_item_seed_and_varies_across_seeds():
    assert run(CAPTION, 5, 3) == run(CAPTION, 5, 3)
    assert len({run(CAPTION, 5, s) for s in range(8)}) > 1


def test_caption_without_content_words_is_unchanged():
    assert run("it is on the", 7) == "it is on the"


@pytest.mark.parametrize("top_k", [0, NEIGHBOUR_POOL + 1, 2.5, True])
def test_bad_top_k_is_one_line_error(top_k):
    with pytest.raises(ValueError, match="top_k"):
        run(CAPTION, 3, top_k=top_k)
