"""Word-level text shifts: EDA (Wei & Zou, 2019) and punctuation insertion (docs/shifts/text.md: word level; semantic filter).

Qiu et al. (Table 8): SR replaces n non-stop words by random WordNet synonyms; WI inserts a random synonym of a
random word at a random position, n times; WS swaps two random words, n times; WD removes each word with
probability p; IP inserts punctuation marks. n = max(1, ⌊r·n_words⌋), p = r = 0.05·s (docs/shifts/text.md, word level).

``variant``: ``vtr_tta`` (default; the HAT-VTR code: whitespace split, case and punctuation kept, IP inserts
q = max(1, ⌊r·n⌋) marks) or ``qiu`` (Qiu's EDA preprocessing — lower case, letters only — and
q = randint(1, ⌊r·n + 1⌋) marks; docs/shifts/text.md, word level). Every type goes through the semantic filter (docs/shifts/text.md, semantic filter). Randomness comes
only from the item's generator; synonym lists and word sets are sorted before any draw (docs/shifts/text.md, randomness), so outputs do not
depend on ``PYTHONHASHSEED``. Synonyms come from WordNet 3.0 (:mod:`tta.shifts.text.wordnet`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from functools import lru_cache

from tta.shifts.text.core import CHAR_SEVERITIES, TextOutcome, ratio, text_shift
from tta.shifts.text.similarity import FILTER_BOUNDS, filter_options, semantic_filter
from tta.shifts.text.wordnet import wordnet

# EDA's stop list (Wei & Zou's eda.py; the NLTK English list without contractions, plus "")
STOP_WORDS = frozenset("""i me my myself we our ours ourselves you your yours yourself yourselves he him his himself
she her hers herself it its itself they them their theirs themselves what which who whom this that these those am
is are was were be been being have has had having do does did doing a an the and but if or because as until while
of at by for with about against between into through during before after above below to from up down in out on
off over under again further then once here there when where why how all any both each few more most other some
such no nor not only own same so than too very s t can will just don should now""".split()) | {""}
PUNCTUATION_MARKS = (".", ",", "!", "?", ";", ":")  # docs/shifts/text.md, word level
VARIANTS = ("vtr_tta", "qiu")


@lru_cache(maxsize=65536)
def synonyms(word: str) -> tuple[str, ...]:
    """EDA's synonyms of ``word`` from WordNet, sorted (docs/shifts/text.md, word level; randomness).

    Lemma names of every synset of the word (any part of speech, via WordNet's morphology) are lower-cased,
    ``_`` and ``-`` become spaces, other non-letters are removed; the word itself is excluded.
    """
    out = set()
    for syn in wordnet().synsets(word):
        for lemma in syn.lemmas():
            name = lemma.name().replace("_", " ").replace("-", " ").lower()
            out.add("".join(ch for ch in name if ch == " " or "a" <= ch <= "z"))
    out.discard(word)
    return tuple(sorted(out))


def only_chars(line: str) -> str:
    """Qiu's EDA preprocessing (``get_only_chars``): lower case, letters and single spaces only (docs/shifts/text.md, word level)."""
    line = line.replace("’", "").replace("'", "").replace("-", " ").lower()
    line = "".join(ch if "a" <= ch <= "z" or ch == " " else " " for ch in line)
    return re.sub(" +", " ", line).strip()


def synonym_replacement(words: list[str], n: int, rng: random.Random) -> list[str]:
    """SR (docs/shifts/text.md, word level): up to n distinct non-stop words, each replaced everywhere by one random synonym."""
    candidates = sorted({w for w in words if w not in STOP_WORDS})
    rng.shuffle(candidates)
    out, replaced = list(words), 0
    for word in candidates:
        syns = synonyms(word)
        if syns:
            new = rng.choice(syns)
            out = [new if w == word else w for w in out]
            replaced += 1
        if replaced >= n:
            break
    return " ".join(out).split(" ")


def random_insertion(words: list[str], n: int, rng: random.Random) -> list[str]:
    """WI (docs/shifts/text.md, word level): n times, the first (alphabetical) synonym of a random word (≤ 10 tries) at a random index."""
    out = list(words)
    for _ in range(n):
        for _try in range(10):
            syns = synonyms(out[rng.randint(0, len(out) - 1)])
            if syns:
                out.insert(rng.randint(0, len(out) - 1), syns[0])
                break
    return out


def random_swap(words: list[str], n: int, rng: random.Random) -> list[str]:
    """WS (docs/shifts/text.md, word level): n times, swap two random positions (up to 3 redraws to make them distinct)."""
    out = list(words)
    for _ in range(n):
        i = j = rng.randint(0, len(out) - 1)
        for _try in range(4):
            j = rng.randint(0, len(out) - 1)
            if j != i:
                break
        if j != i:
            out[i], out[j] = out[j], out[i]
    return out


def random_deletion(words: list[str], p: float, rng: random.Random) -> list[str]:
    """WD (docs/shifts/text.md, word level): keep a word when a uniform draw exceeds p; one word is never deleted; never return nothing."""
    if len(words) == 1:
        return list(words)
    kept = [w for w in words if rng.uniform(0, 1) > p]
    return kept or [words[rng.randint(0, len(words) - 1)]]


def insert_punctuation_marks(text: str, r: float, rng: random.Random, variant: str) -> str:
    """IP (docs/shifts/text.md, word level): a random mark from ``. , ! ? ; :`` before q distinct random words."""
    words = text.split(" ")
    q = max(1, int(r * len(words))) if variant == "vtr_tta" else rng.randint(1, int(r * len(words) + 1))
    chosen = set(rng.sample(range(len(words)), min(q, len(words))))
    out = []
    for j, word in enumerate(words):
        if j in chosen:
            out.append(PUNCTUATION_MARKS[rng.randint(0, len(PUNCTUATION_MARKS) - 1)])
        out.append(word)
    return " ".join(out)


def _word_shift(name: str, op: Callable[[list[str], int, float, random.Random], list[str]], doc: str) -> None:
    def fn(text: str, severity: int, rng: random.Random, variant: str = "vtr_tta", **options) -> TextOutcome:
        if variant not in VARIANTS:
            raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
        filt = filter_options(dict(options))
        unknown = set(options) - {"filter_enabled", "filter_threshold", "filter_max_tries", "filter_on_fail"}
        if unknown:
            raise TypeError(f"unknown options for {name}: {sorted(unknown)}")
        base = only_chars(text) if variant == "qiu" else text
        words = [w for w in base.split() if w]
        if not words:
            return TextOutcome(text, 0, 1.0, False, True)
        r = ratio(severity)
        n = max(1, int(r * len(words)))

        def draw() -> str:
            out = " ".join(op(words, n, r, rng))
            return only_chars(out) if variant == "qiu" else out

        return semantic_filter(text, draw, **filt)

    fn.__name__, fn.__doc__ = name, doc
    text_shift(name, CHAR_SEVERITIES, "word", bounds=FILTER_BOUNDS)(fn)


_word_shift("synonym_replace", lambda w, n, r, rng: synonym_replacement(w, n, rng),
            "EDA synonym replacement (Table 10 'SR'), WordNet synonyms, semantic filter.")
_word_shift("word_insert", lambda w, n, r, rng: random_insertion(w, n, rng),
            "EDA random insertion of synonyms (Table 10 'WI'), semantic filter.")
_word_shift("word_swap", lambda w, n, r, rng: random_swap(w, n, rng),
            "EDA random swap (Table 10 'WS'), semantic filter.")
_word_shift("word_delete", lambda w, n, r, rng: random_deletion(w, r, rng),
            "EDA random deletion with p = r (Table 10 'WD'), semantic filter.")


@text_shift("insert_punctuation", CHAR_SEVERITIES, "word", bounds=FILTER_BOUNDS)
def insert_punctuation(text: str, severity: int, rng: random.Random, variant: str = "vtr_tta",
                       **options) -> TextOutcome:
    """Punctuation insertion (AEDA-style; Table 10 'IP'), semantic filter (docs/shifts/text.md: word level; semantic filter)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    filt = filter_options(options)
    if options:
        raise TypeError(f"unknown options for insert_punctuation: {sorted(options)}")
    if not text.strip():
        return TextOutcome(text, 0, 1.0, False, True)
    return semantic_filter(text, lambda: insert_punctuation_marks(text, ratio(severity), rng, variant), **filt)
