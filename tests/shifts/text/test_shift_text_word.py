"""Word-level text shifts (EDA + punctuation) and the semantic filter on real MSR-VTT captions (spec §4, §6)."""

from __future__ import annotations

import pytest

from tests.shifts.text.text_captions import msrvtt_captions, need_wordnet
from tta.shifts import item_seed, perturb_text
from tta.shifts.text import perturb_text_detailed
from tta.shifts.text.word import PUNCTUATION_MARKS, STOP_WORDS

WORD = ["synonym_replace", "word_insert", "word_swap", "word_delete", "insert_punctuation"]
NOFILTER = {"filter_enabled": False}


@pytest.fixture(scope="module", autouse=True)
def _wordnet(single_thread_torch):  # the MiniLM filter encoder is fastest on one thread on a loaded machine
    need_wordnet()


def wordnet_lemma_names(word: str) -> set[str]:
    """Every lemma name of every WordNet synset of ``word``, straight from the reader (EDA's normalisation)."""
    from tta.shifts.text.wordnet import wordnet

    names = set()
    for syn in wordnet().synsets(word):
        for lemma in syn.lemmas():
            n = lemma.name().replace("_", " ").replace("-", " ").lower()
            names.add("".join(ch for ch in n if ch == " " or ch.isalpha()))
    return names


def test_wordnet_is_the_debian_database():
    from tta.shifts.text.word import synonyms
    from tta.shifts.text.wordnet import wordnet

    assert wordnet().get_version() == "3.0"
    assert "automobile" in synonyms("car") and "car" not in synonyms("car")
    assert synonyms("car") == tuple(sorted(synonyms("car")))


@pytest.mark.parametrize("name", WORD)
def test_deterministic_per_seed(name):
    caps = msrvtt_captions(30)
    a = [perturb_text(c, name, 2, item_seed(42, i, name, 2), **NOFILTER) for i, c in caps]
    perturb_text("a dog runs", "word_swap", 5, 7, **NOFILTER)
    b = [perturb_text(c, name, 2, item_seed(42, i, name, 2), **NOFILTER) for i, c in caps]
    assert a == b
    assert sum(x != c for x, (_, c) in zip(a, caps, strict=True)) >= 20


def test_synonyms_come_from_wordnet():
    caps = msrvtt_captions(150)
    replaced = 0
    for cid, c in caps:
        out = perturb_text(c, "synonym_replace", 4, item_seed(42, cid, "sr", 4), **NOFILTER)
        words = c.split()
        n = max(1, int(0.2 * len(words)))
        if len(out.split()) != len(words):  # multi-word synonyms: compare by source word
            continue
        sources = set()
        for w, o in zip(words, out.split(), strict=True):
            if w != o:
                assert w not in STOP_WORDS
                assert o in wordnet_lemma_names(w), (w, o)
                sources.add(w)
                replaced += 1
        assert len(sources) <= n
    assert replaced >= 100


def test_insert_swap_delete_semantics():
    for cid, c in msrvtt_captions(100):
        words = c.split()
        n = max(1, int(0.35 * len(words)))
        ins = perturb_text(c, "word_insert", 7, item_seed(1, cid, "wi", 7), **NOFILTER).split()
        assert len(words) <= len(ins) <= len(words) + 3 * n  # a synonym may have several words
        swp = perturb_text(c, "word_swap", 7, item_seed(1, cid, "ws", 7), **NOFILTER).split()
        assert sorted(swp) == sorted(words)
        dele = perturb_text(c, "word_delete", 7, item_seed(1, cid, "wd", 7), **NOFILTER).split()
        it = iter(words)
        assert dele and all(w in it for w in dele)  # a subsequence
        ip = perturb_text(c, "insert_punctuation", 7, item_seed(1, cid, "ip", 7), **NOFILTER).split()
        marks = [w for w in ip if w in PUNCTUATION_MARKS]
        assert [w for w in ip if w not in PUNCTUATION_MARKS] == words
        assert len(marks) == min(n, len(words))


def test_qiu_variant_is_lowercase_letters_only():
    out = perturb_text("A Man's car-wash, in 2020!", "word_swap", 7, 3, variant="qiu", **NOFILTER)
    assert out == out.lower() and all(ch.isalpha() or ch == " " for ch in out)
    with pytest.raises(ValueError, match="variant must be one of"):
        perturb_text("a man", "word_swap", 2, 0, variant="eda")


def test_filter_keeps_similar_candidates_and_falls_back_as_specified():
    from tta.shifts.text.similarity import sentence_encoder

    enc = sentence_encoder()
    caps = msrvtt_captions(16)
    for name in ("synonym_replace", "word_delete", "insert_punctuation"):
        for cid, c in caps:
            o = perturb_text_detailed(c, name, 2, item_seed(42, cid, name, 2))
            assert o.text == perturb_text(c, name, 2, item_seed(42, cid, name, 2))
            e = enc([c, o.text])
            cos = float(e[0] @ e[1])
            if o.passed:
                assert o.cosine >= 0.9 and abs(cos - o.cosine) < 1e-4 and 1 <= o.tries <= 100
            else:
                assert o.tries == 100 and o.cosine < 0.9 and abs(cos - o.cosine) < 1e-4
    # force failures: nothing reaches cosine 0.99999 -> 100 tries, then the last candidate or the original
    c = caps[0][1]
    last = perturb_text_detailed(c, "synonym_replace", 7, 5, filter_threshold=0.99999)
    orig = perturb_text_detailed(c, "synonym_replace", 7, 5, filter_threshold=0.99999, filter_on_fail="keep_original")
    assert (last.tries, last.passed, orig.tries, orig.passed) == (100, False, 100, False)
    assert last.text != c and orig.text == c
    with pytest.raises(ValueError, match="filter_on_fail"):
        perturb_text(c, "word_swap", 2, 0, filter_on_fail="drop")


def test_filter_result_matches_sequential_filtering():
    """Batched drawing returns the first passing candidate in draw order (as one-at-a-time filtering would)."""
    import random

    from tta.shifts.text.similarity import cosines, semantic_filter
    from tta.shifts.text.word import random_deletion

    c = "a man is giving a review on a vehicle while a woman is talking about cars"
    words = c.split()
    draw_rng = random.Random(9)
    out = semantic_filter(c, lambda: " ".join(random_deletion(words, 0.35, draw_rng)), threshold=0.95)
    seq, rng = None, random.Random(9)
    for k in range(100):
        cand = " ".join(random_deletion(words, 0.35, rng))
        if cosines(c, [cand])[0] >= 0.95:
            seq = (cand, k + 1)
            break
    assert seq is not None and (out.text, out.tries) == seq
