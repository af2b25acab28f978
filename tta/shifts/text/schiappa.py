"""Schiappa et al. (2022) text perturbations beyond ChangeChar (Sec. 3.2): AddText, Bias, DropText, Positional.

- **AddText**: ``add_irrelevant_phrase`` appends a phrase unrelated to the video; ``insert_adverb`` puts an adverb
  before the main verb (at the end when there is none).
- **Bias**: ``gender_male`` (every female reference made male), ``gender_female`` (male → female),
  ``gender_swap`` (both at once), ``gender_neutral`` (gender-neutral words, with "he is" → "they are" agreement).
- **DropText** (POS tags from :mod:`tta.shifts.text.pos`, Penn classes NN = nouns, VB = verbs incl. auxiliaries):
  ``drop_nn``, ``drop_vb``, ``drop_vbnn`` replace every word of the class with [UNK]; ``rand_nn`` replaces one
  random noun ("a little girl does gymnastics" → "a little [UNK] does gymnastics", the paper's example);
  ``only_nn``, ``only_vb``, ``only_nnvb`` drop every word but those of the class (``mark_dropped=true`` writes
  [UNK] in their place instead).
- **Positional**: ``drop_first``, ``drop_last``, ``drop_first_last`` replace the word at that position with
  [UNK]; ``shuffle_order`` shuffles the words.

The paper's appendix (exact word lists, severities) is not available; these are single-level (severity 1)
constructions from the paper's definitions, seeded per item.
"""

from __future__ import annotations

import random

from tta.shifts.text import gender
from tta.shifts.text.core import SENTENCE_SEVERITIES, TextOutcome, outcome, text_shift
from tta.shifts.text.pos import is_noun, is_verb, pos_tag

UNK = "[UNK]"
IRRELEVANT_PHRASES = ("and the weather is nice today", "by the way", "as far as i know", "to be honest",
                      "which is not important", "believe it or not", "in my opinion", "if you ask me",
                      "for what it is worth", "just saying")
ADVERBS = ("quickly", "slowly", "happily", "carefully", "suddenly", "quietly", "loudly", "gently", "eagerly",
           "calmly", "easily", "nervously", "proudly", "seriously", "really")


def _words(text: str) -> tuple[list[str], list[str]]:
    """Whitespace tokens and their lower-case, punctuation-stripped forms (what the tagger sees)."""
    words = text.split()
    return words, [w.strip(".,!?;:\"'()").lower() or w for w in words]


def _single(name: str, level: str = "word"):
    return text_shift(name, SENTENCE_SEVERITIES, level)


# --- AddText -------------------------------------------------------------------------------------------------
@_single("add_irrelevant_phrase", "sentence")
def add_irrelevant_phrase(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """AddText: append a random irrelevant phrase."""
    return outcome(text, f"{text.rstrip()} {rng.choice(IRRELEVANT_PHRASES)}")


@_single("insert_adverb")
def insert_adverb(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """AddText: a random adverb before the first main (non-auxiliary) verb, else at the end."""
    words, low = _words(text)
    tags = pos_tag(low)
    at = next((i for i, t in enumerate(tags) if t == "VERB"), len(words))
    return outcome(text, " ".join([*words[:at], rng.choice(ADVERBS), *words[at:]]))


# --- Bias ----------------------------------------------------------------------------------------------------
def _match_case(src: str, new: str) -> str:
    return new[:1].upper() + new[1:] if src[:1].isupper() else new


def _regender(text: str, table: dict[str, str], her: str | None) -> str:
    words, low = _words(text)
    tags = pos_tag(low) if her else []
    out = []
    for i, (w, lw) in enumerate(zip(words, low, strict=True)):
        new = table.get(lw)
        if lw == "her" and her:
            nxt = tags[i + 1] if i + 1 < len(tags) else None
            new = {"male": ("his", "him"), "neutral": ("their", "them")}[her][0 if nxt in ("NOUN", "ADJ", "NUM")
                                                                                 else 1]
        if new is None:
            out.append(w)
        elif new:
            out.append(_match_case(w, w.lower().replace(lw, new, 1)))
    return " ".join(out)


@_single("gender_male")
def gender_male(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Bias: every female reference made male ("a woman and her son" → "a man and his son")."""
    return outcome(text, _regender(text, gender.TO_MALE, "male"))


@_single("gender_female")
def gender_female(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Bias: every male reference made female."""
    return outcome(text, _regender(text, gender.TO_FEMALE, None))


@_single("gender_swap")
def gender_swap(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Bias: male and female references exchanged."""
    return outcome(text, _regender(text, {**gender.TO_MALE, **gender.TO_FEMALE}, "male"))


_AGREE = {"is": "are", "was": "were", "has": "have", "does": "do", "'s": "are"}


@_single("gender_neutral")
def gender_neutral(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Bias: gender-specific words made neutral; a verb right after "he"/"she" agrees with "they"."""
    words = _regender(text, gender.TO_NEUTRAL, "neutral").split()
    _, low = _words(text)
    for i in range(1, len(words)):
        if words[i - 1].lower() == "they" and i - 1 < len(low) and low[i - 1] in ("he", "she"):
            words[i] = _AGREE.get(words[i], _base_if_3sg(words[i]))
    return outcome(text, " ".join(words))


def _base_if_3sg(word: str) -> str:
    if not word.endswith("s") or word.endswith("ss"):
        return word
    from lemminflect import getLemma

    lemma = getLemma(word, upos="VERB")
    return lemma[0] if lemma else word


# --- DropText ------------------------------------------------------------------------------------------------
def _drop(text: str, keep, unk: str, mark: bool = True) -> str:
    words, low = _words(text)
    tags = pos_tag(low)
    out = [w if keep(t) else (unk if mark else None) for w, t in zip(words, tags, strict=True)]
    out = [w for w in out if w is not None]
    return " ".join(out) if out else unk


def _register_drop(name: str, keep, doc: str, mark_default: bool) -> None:
    def fn(text: str, severity: int, rng: random.Random, unk_token: str = UNK,
           mark_dropped: bool = mark_default) -> TextOutcome:
        return outcome(text, _drop(text, keep, unk_token, mark_dropped))

    fn.__name__, fn.__doc__ = name, doc
    _single(name)(fn)


_register_drop("drop_nn", lambda t: not is_noun(t), "DropText: every noun → [UNK].", True)
_register_drop("drop_vb", lambda t: not is_verb(t), "DropText: every verb (incl. auxiliaries) → [UNK].", True)
_register_drop("drop_vbnn", lambda t: not (is_noun(t) or is_verb(t)), "DropText: every noun and verb → [UNK].",
               True)
_register_drop("only_nn", is_noun, "DropText: only the nouns are kept.", False)
_register_drop("only_vb", is_verb, "DropText: only the verbs are kept.", False)
_register_drop("only_nnvb", lambda t: is_noun(t) or is_verb(t), "DropText: only nouns and verbs are kept.", False)


@_single("rand_nn")
def rand_nn(text: str, severity: int, rng: random.Random, unk_token: str = UNK) -> TextOutcome:
    """DropText: one random noun → [UNK] (unchanged without nouns)."""
    words, low = _words(text)
    nouns = [i for i, t in enumerate(pos_tag(low)) if is_noun(t)]
    if nouns:
        words[rng.choice(nouns)] = unk_token
    return outcome(text, " ".join(words))


# --- Positional ----------------------------------------------------------------------------------------------
def _positions(name: str, which, doc: str) -> None:
    def fn(text: str, severity: int, rng: random.Random, unk_token: str = UNK) -> TextOutcome:
        words = text.split()
        for i in which(len(words)):
            words[i] = unk_token
        return outcome(text, " ".join(words))

    fn.__name__, fn.__doc__ = name, doc
    _single(name)(fn)


_positions("drop_first", lambda n: range(min(n, 1)), "Positional: the first word → [UNK].")
_positions("drop_last", lambda n: range(n - 1, n) if n else (), "Positional: the last word → [UNK].")
_positions("drop_first_last", lambda n: sorted({0, n - 1}) if n else (), "Positional: first and last → [UNK].")


@_single("shuffle_order")
def shuffle_order(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Positional: the words in a random order."""
    words = text.split()
    rng.shuffle(words)
    return outcome(text, " ".join(words))


#: the text categories of Schiappa et al. (Sec. 3.2) of every text shift that belongs to one: the character
#: changes (Qiu's and the added ones), the model- or rule-based word swaps, additions, bias, POS-based drops,
#: positional changes and style (for the robustness aggregates of docs/methods/metrics.md)
SCHIAPPA_TEXT_CATEGORY = {
    **dict.fromkeys(("ocr", "char_insert", "char_replace", "char_swap", "char_delete", "keyboard", "spelling_error",
                     "typos"), "ChangeChar"),
    **dict.fromkeys(("swap_text", "synonym_replace", "word_swap", "back_translation", "back_translation_approx"),
                    "SwapText"),
    **dict.fromkeys(("add_irrelevant_phrase", "insert_adverb", "word_insert", "insert_punctuation"), "AddText"),
    **dict.fromkeys(("gender_male", "gender_female", "gender_swap", "gender_neutral"), "Bias"),
    **dict.fromkeys(("drop_nn", "drop_vb", "drop_vbnn", "rand_nn", "only_nn", "only_vb", "only_nnvb", "word_delete"),
                    "DropText"),
    **dict.fromkeys(("drop_first", "drop_last", "drop_first_last", "shuffle_order"), "Positional"),
    **dict.fromkeys(("formal", "casual", "passive", "active", "formal_approx", "casual_approx", "passive_approx",
                     "active_approx"), "TextStyle"),
}
#: the categories Schiappa et al. report but leave out of their text aggregate, which keeps natural shifts only
#: (Table 4: no Positional, no DropText)
SCHIAPPA_TEXT_NOT_AGGREGATED = ("Positional", "DropText")
