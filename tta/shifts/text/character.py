"""Character-level text shifts (docs/shifts/text.md, character level; Qiu et al. Sec. 2, Table 8; Schiappa et al.
Sec. 3.2 "ChangeChar", Fig. 3).

The five HAT-VTR types call nlpaug 1.1.11 exactly as the HAT-VTR code does — ``OcrAug(aug_word_p=r)`` and
``RandomCharAug(action=insert|substitute|swap|delete, aug_word_p=r)`` with r = 0.05·s, s = 1..7, taking the first
element of ``augment()``. So n_w = clamp(⌈r·n_tokens⌉, 1, 10) words (capped by the eligible ones: length ≥ 4, or
≥ 1 for OCR) change, each in clamp(⌈0.3·len⌉, 1 or 2, 10) characters (docs/shifts/text.md, character level, Qiu et al. Table 8). No semantic filter.

Added ChangeChar variants (available, not part of the HAT-VTR benchmark):
- ``keyboard``: nlpaug ``KeyboardAug(aug_word_p=r)`` (Qiu's 16th type; Schiappa's "Keyboard");
- ``spelling_error``: nlpaug ``SpellingAug(aug_p=r)`` with its bundled list of common misspellings (Schiappa's
  "SpellingErr"); the candidate lists are sorted, since nlpaug builds them from a set (hash-order dependent);
- ``typos``: Schiappa's "Typos" (e.g. "g areview", "vehiclfe"), built here: n_w words as above each get one of
  drop / repeat / transpose a character, or merge with the next word / split in two.

nlpaug draws from Python's and NumPy's global generators; each call runs on a stream seeded from the item seed
and restores the global state (:func:`~tta.shifts.text.core.global_rng_from`).
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

from tta.shifts.text.core import CHAR_SEVERITIES, TextOutcome, global_rng_from, outcome, ratio, text_shift

RANDOM_CHAR_ACTIONS = {"char_insert": "insert", "char_replace": "substitute", "char_swap": "swap",
                       "char_delete": "delete"}


def _nlpaug(module: str):
    """nlpaug's ``char`` or ``word`` augmenters, imported apart: only SpellingAug needs ``word``, which brings NLTK
    and scikit-learn with it."""
    import importlib

    try:
        return importlib.import_module(f"nlpaug.augmenter.{module}")
    except ImportError as e:
        raise ImportError("character-level text shifts need nlpaug from the 'text' extra: pip install -e '.[text]' "
                          "(nlpaug==1.1.11)") from e


@lru_cache(maxsize=64)
def augmenter(kind: str, severity: int):
    """The nlpaug augmenter of one type and severity (stateless apart from its settings; cached)."""
    r = ratio(severity)
    if kind == "spelling_error":
        aug = _nlpaug("word").SpellingAug(aug_p=r)
        aug.model.dict = {k: sorted(v) for k, v in aug.model.dict.items()}  # nlpaug: list(set(...))
        return aug
    nac = _nlpaug("char")
    if kind == "ocr":
        return nac.OcrAug(aug_word_p=r)
    if kind in RANDOM_CHAR_ACTIONS:
        return nac.RandomCharAug(action=RANDOM_CHAR_ACTIONS[kind], aug_word_p=r)
    if kind == "keyboard":
        return nac.KeyboardAug(aug_word_p=r)
    raise KeyError(kind)


def nlpaug_apply(kind: str, text: str, severity: int, rng: random.Random) -> str:
    """Run one nlpaug augmenter on ``text`` with globals seeded from ``rng`` (state restored)."""
    if not text.strip():
        return text
    aug = augmenter(kind, severity)
    with global_rng_from(rng):
        out = aug.augment(text)
    out = out[0] if isinstance(out, list) else out  # nlpaug 1.1.11 returns a list
    return out if isinstance(out, str) and out else text


def _register_nlpaug(name: str, doc: str) -> None:
    def fn(text: str, severity: int, rng: random.Random) -> TextOutcome:
        return outcome(text, nlpaug_apply(name, text, severity, rng))

    fn.__name__, fn.__doc__ = name, doc
    text_shift(name, CHAR_SEVERITIES, "character")(fn)


for _name, _doc in {
    "ocr": "OCR errors (nlpaug OcrAug): o↔0, l→1, z→2, s→8, b→6, g/q→9, r↔k ... (Qiu Table 8 'OCR').",
    "char_insert": "Random character insertion (nlpaug RandomCharAug insert; Table 10 'CI').",
    "char_replace": "Random character substitution (nlpaug RandomCharAug substitute; Table 10 'CR').",
    "char_swap": "Random swap of neighbouring characters (nlpaug RandomCharAug swap; Table 10 'CS').",
    "char_delete": "Random character deletion (nlpaug RandomCharAug delete; Table 10 'CD').",
    "keyboard": "Keyboard-neighbour typos (nlpaug KeyboardAug; Qiu's 'Keyboard', Schiappa's 'Keyboard').",
    "spelling_error": "Common misspellings (nlpaug SpellingAug, bundled list; Schiappa's 'SpellingErr').",
}.items():
    _register_nlpaug(_name, _doc)


def _typo(word: str, rng: random.Random) -> str:
    op = rng.choice(("drop", "repeat", "transpose")) if len(word) >= 3 else "repeat"
    i = rng.randrange(len(word) - 1) if len(word) > 1 else 0
    if op == "drop":
        return word[:i] + word[i + 1:]
    if op == "repeat":
        return word[: i + 1] + word[i] + word[i + 1:]
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


@text_shift("typos", CHAR_SEVERITIES, "character")
def typos(text: str, severity: int, rng: random.Random) -> TextOutcome:
    """Schiappa's 'Typos': n_w = clamp(⌈r·n⌉, 1, 10) words get a character typo or a misplaced space."""
    words = text.split()
    if not words:
        return outcome(text, text)
    n = min(max(1, math.ceil(ratio(severity) * len(words))), 10, len(words))
    chosen = sorted(rng.sample(range(len(words)), n), reverse=True)  # right to left keeps indices valid
    for i in chosen:
        space_op = rng.random() < 0.3
        if space_op and i + 1 < len(words) and rng.random() < 0.5:
            words[i: i + 2] = [words[i] + words[i + 1]]  # a missing space
        elif space_op and len(words[i]) >= 4:
            cut = rng.randrange(1, len(words[i]))
            words[i: i + 1] = [words[i][:cut], words[i][cut:]]  # a misplaced space
        else:
            words[i] = _typo(words[i], rng)
    return outcome(text, " ".join(words))
