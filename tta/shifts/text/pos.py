"""An offline part-of-speech tagger from WordNet lexical categories (for Schiappa et al.'s DropText, Sec. 3.2).

Schiappa et al. drop words by POS tag (NN, VB); a trained tagger cannot be downloaded here, so the tags come from
a small first-order Viterbi decoder:

- **Closed classes** (determiners, pronouns, prepositions, conjunctions, auxiliaries, modals, particles, numbers)
  come from fixed word lists.
- **Open classes** (NOUN, VERB, ADJ, ADV) are the parts of speech WordNet 3.0 lists for the word through its own
  morphology (``morphy``); the emission weight of each is its SemCor tagged-sense count (``cntlist``, exposed as
  ``Lemma.count()``) plus one per synset, normalised over the word's categories. Words WordNet lacks (names,
  typos) are nouns, or verbs/adverbs by suffix (-ing, -ed, -ly).
- **Transitions** are hand-set English priors between tags (e.g. DET → NOUN/ADJ, AUX → VERB, NOUN → VERB/ADP).

Tags follow Penn Treebank classes for the drops: ``NN`` = NOUN (NN, NNS, NNP, NNPS) and ``VB`` = VERB + AUX (all
VB* forms, including the copula and auxiliaries "is", "has", "does"; modals are MD, not VB). It is checked on
hand-tagged MSR-VTT captions in the tests; captions are short and mostly unambiguous, but it is a heuristic tagger.
"""

from __future__ import annotations

import math
from functools import lru_cache

from tta.shifts.text.wordnet import wordnet

DET = set("a an the this that these those some any each every another no all both either neither such what which "
          "whose my your his her its our their".split())
PRON = set("i me you he him she it we us they them someone somebody something anyone anybody anything everyone "
           "everybody everything nobody nothing himself herself itself themselves myself yourself ourselves who "
           "whom others mine yours hers ours theirs".split())
ADP = set("in on at of with by for from into onto over under about through across along around behind beside "
          "besides near between after before during without within inside outside toward towards upon against "
          "like than via past among throughout beneath above below".split())
CONJ = set("and or but nor yet while because if when where though although whereas unless whether".split())
AUX_BE = set("am is are was were be been being".split())
AUX_HAVE_DO = set("has have had having do does did doing".split())
MODAL = set("can could will would shall should may might must".split())
PART = set("to not n't 's".split())
ADV_CLOSED = set("very really also just then there here now too again still even only always never often soon "
                 "away back together else almost quite rather so up down out off how why".split())
NUM_WORDS = set("one two three four five six seven eight nine ten eleven twelve twenty thirty hundred thousand "
                "million".split())

TAGS = ("DET", "PRON", "ADP", "CONJ", "AUX", "MD", "PART", "NUM", "NOUN", "VERB", "ADJ", "ADV")
NN_TAGS = frozenset({"NOUN"})
VB_TAGS = frozenset({"VERB", "AUX"})

# P(tag | previous tag): hand-set priors ("^" = sentence start); unlisted pairs get a small floor
_T = {
    "^": {"DET": .45, "NOUN": .2, "PRON": .1, "ADJ": .1, "NUM": .05, "VERB": .05, "ADV": .02, "ADP": .02},
    "DET": {"NOUN": .55, "ADJ": .3, "NUM": .05, "ADV": .04, "VERB": .02},
    "ADJ": {"NOUN": .6, "ADJ": .15, "CONJ": .08, "ADP": .08, "VERB": .03, "PART": .03},
    "NOUN": {"VERB": .2, "AUX": .18, "NOUN": .15, "ADP": .2, "CONJ": .1, "ADV": .05, "PART": .03, "MD": .03,
             "DET": .03, "ADJ": .03},
    "PRON": {"AUX": .3, "VERB": .35, "ADP": .1, "ADV": .05, "MD": .05, "CONJ": .05, "NOUN": .02},
    "AUX": {"VERB": .6, "ADV": .08, "DET": .1, "ADJ": .08, "NOUN": .04, "ADP": .05, "PART": .03, "AUX": .05},
    "MD": {"AUX": .3, "VERB": .6, "ADV": .05, "PART": .05},
    "VERB": {"DET": .3, "NOUN": .15, "ADP": .22, "ADV": .1, "PRON": .1, "ADJ": .05, "VERB": .03, "PART": .05,
             "CONJ": .05, "NUM": .03},
    "ADP": {"DET": .5, "NOUN": .25, "PRON": .1, "ADJ": .08, "VERB": .05, "NUM": .03},
    "CONJ": {"DET": .25, "NOUN": .25, "VERB": .2, "PRON": .1, "ADJ": .1, "ADV": .05, "AUX": .03},
    "PART": {"VERB": .7, "DET": .1, "NOUN": .1, "ADJ": .05},
    "NUM": {"NOUN": .6, "ADJ": .1, "ADP": .1, "NUM": .05, "CONJ": .05, "VERB": .05},
    "ADV": {"VERB": .3, "ADJ": .2, "ADP": .15, "DET": .1, "ADV": .08, "NOUN": .07, "AUX": .05, "CONJ": .05},
}
_FLOOR = 1e-3
EMISSION_WEIGHT = 0.5  # tempers SemCor counts, which favour verb readings ("show", "judges"), against context
PLURAL_LEMMAS = frozenset("people police cattle crowd family team audience".split())  # nouns that take plural verbs
_WN_POS = {"n": "NOUN", "v": "VERB", "a": "ADJ", "s": "ADJ", "r": "ADV"}


def _closed(word: str) -> dict[str, float] | None:
    if word.isdigit() or word in NUM_WORDS:
        return {"NUM": 1.0}
    table = [(DET, "DET"), (PRON, "PRON"), (ADP, "ADP"), (CONJ, "CONJ"), (AUX_BE, "AUX"), (MODAL, "MD"),
             (PART, "PART")]
    tags = {tag: 1.0 for words, tag in table if word in words}
    if word in AUX_HAVE_DO:
        tags.update({"AUX": 0.5, "VERB": 0.5})
    if word in ADV_CLOSED:
        tags["ADV"] = 1.0
    if word == "that":
        tags.update({"PRON": 0.5, "CONJ": 0.5})
    if word in ("her", "his"):
        tags["PRON"] = 0.5
    return tags or None


@lru_cache(maxsize=65536)
def lexical_categories(word: str) -> dict[str, float]:
    """P(tag | word) before context: closed lists, else WordNet categories weighted by sense counts."""
    word = word.lower()
    closed = _closed(word)
    if closed:
        return closed
    wn = wordnet()
    weights: dict[str, float] = {}
    for pos, tag in _WN_POS.items():
        lemma = wn.morphy(word, pos)
        if lemma is None:
            continue
        synsets = wn.synsets(lemma, pos)
        count = sum(lm.count() for s in synsets for lm in s.lemmas() if lm.name().lower() == lemma)
        weights[tag] = weights.get(tag, 0.0) + count + len(synsets)
    if weights and word.endswith("ing") and "VERB" in weights:
        weights["VERB"] *= 3.0  # the -ing form is mostly a participle in captions
    if not weights:  # not in WordNet
        if word.endswith("ing") or word.endswith("ed"):
            weights = {"VERB": 0.6, "NOUN": 0.3, "ADJ": 0.1}
        elif word.endswith("ly"):
            weights = {"ADV": 0.7, "ADJ": 0.3}
        else:
            weights = {"NOUN": 0.9, "ADJ": 0.1}
    total = sum(weights.values())
    return {t: w / total for t, w in weights.items()}


@lru_cache(maxsize=65536)
def is_plural_noun(word: str) -> bool:
    """A plural noun form: WordNet's morphology reduces it to another lemma ("men" → "man"), or a plural lemma."""
    if word in PLURAL_LEMMAS:
        return True
    return not word.endswith("ss") and any(f != word for f in wordnet()._morphy(word, "n"))


def _finite_or_base(word: str) -> bool:
    """A verb form other than a participle (-ing, -ed, -en, irregular participles look like -ed/-en here)."""
    return not word.endswith(("ing", "ed", "en"))


def _context(prev_tag: str, prev_word: str, tag: str, word: str) -> float:
    """Agreement factors a first-order tag model misses: no finite/base verb right after DET, ADP or ADJ; no
    bare base-form verb after a singular noun ("cartoon show", "pet shop"); a noun rarely follows a plural noun
    ("two men talk")."""
    if tag == "NOUN" and prev_tag == "NOUN" and is_plural_noun(prev_word):
        return 0.2
    if tag != "VERB" or not _finite_or_base(word):
        return 1.0
    if prev_tag in ("DET", "ADP", "ADJ"):
        return 0.05
    if prev_tag == "NOUN" and not word.endswith("s") and wordnet().morphy(word, "v") == word:
        if not is_plural_noun(prev_word) and not prev_word.endswith("s"):
            return 0.05
    return 1.0


def pos_tag(words: list[str]) -> list[str]:
    """Tags (one of :data:`TAGS`) of a tokenised caption by Viterbi decoding (see the module docstring)."""
    if not words:
        return []
    low = [w.lower() for w in words]
    cands = [lexical_categories(w) for w in low]
    best = {t: (math.log(_T["^"].get(t, _FLOOR)) + EMISSION_WEIGHT * math.log(p), [t]) for t, p in cands[0].items()}
    for i, emis in enumerate(cands[1:], start=1):
        step = {}
        for t, p in emis.items():
            score, path = max(((s + math.log(_T[prev].get(t, _FLOOR) * _context(prev, low[i - 1], t, low[i])), path)
                               for prev, (s, path) in best.items()), key=lambda x: x[0])
            step[t] = (score + EMISSION_WEIGHT * math.log(p), [*path, t])
        best = step
    return max(best.values(), key=lambda x: x[0])[1]


def is_noun(tag: str) -> bool:
    return tag in NN_TAGS


def is_verb(tag: str) -> bool:
    return tag in VB_TAGS
