"""Shared machinery of the text shifts (docs/shifts/text.md: severity, HAT-VTR App. B.4; semantic filter; randomness).

- :func:`ratio` maps a severity s to r = 0.05·s (docs/shifts/text.md, severity, HAT-VTR App. B.4).
- :class:`TextOutcome` is one caption's result with the filter's record (tries, final cosine, changed; docs/shifts/text.md, semantic filter).
- :func:`text_shift` registers a shift in the registry, both its text view (``perturb_text``) and its detailed one
  (:func:`perturb_text_detailed`; the caption-file CLI writes the side-car).
- :func:`global_rng_from` runs code that uses Python's and NumPy's *global* generators (nlpaug) on a stream seeded
  from the item's generator and restores both states afterwards, so no state leaks between captions or shifts and
  the output does not depend on the order shifts run in (docs/shifts/text.md, randomness).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np

from tta.shifts.registry import register_text_shift

CHAR_SEVERITIES = tuple(range(1, 8))  # s = 1..7, r = 0.05·s (docs/shifts/text.md, severity; HAT-VTR App. B.4)
SENTENCE_SEVERITIES = (1,)

_MEMO: dict[tuple, tuple[TextOutcome, tuple]] = {}
MEMO_SIZE = 200_000


@dataclass(frozen=True)
class TextOutcome:
    """A perturbed caption and how it was obtained (tries, final cosine, changed; docs/shifts/text.md, semantic filter)."""

    text: str
    tries: int = 1
    cosine: float | None = None  # None when the shift has no semantic filter
    changed: bool = True
    passed: bool = True  # False when no candidate reached the threshold (the fallback was used)


def ratio(severity: int) -> float:
    """r = 0.05·s (docs/shifts/text.md, severity, HAT-VTR App. B.4)."""
    return 0.05 * int(severity)


def outcome(original: str, text: str) -> TextOutcome:
    return TextOutcome(text=text, changed=text != original)


def text_shift(name: str, severities=CHAR_SEVERITIES, level: str = "character", needs_model: bool = False,
               **implementation):
    """Register ``fn(text, severity, rng, **options) -> TextOutcome`` as the text shift ``name``.

    The registry gets the ``-> str`` view and the detailed one; ``needs_model`` marks shifts that only run with a
    local model path (the sentence-level originals; their rule-based approximations have their own ``*_approx``
    ids); ``implementation`` is what the shift is (``approximates``/``note``/``deviation``, and ``seed_as``,
    :func:`tta.shifts.registry.register_text_shift`).
    """

    def wrap(fn: Callable[..., TextOutcome]):
        def detailed(text: str, severity: int, rng: random.Random, **options) -> TextOutcome:
            # outputs are a pure function of (text, severity, generator state, options): memoised, so that
            # implementation_record's changed share re-reads a stream's captions without perturbing them again
            key = (name, text, severity, hash(rng.getstate()), repr(sorted(options.items())))
            if key not in _MEMO:
                if len(_MEMO) >= MEMO_SIZE:
                    _MEMO.clear()
                result = fn(text, severity, rng, **options)
                _MEMO[key] = (result, rng.getstate())
            result, after = _MEMO[key]
            rng.setstate(after)  # a shared generator advances exactly as without the memo
            return result

        def as_text(text: str, severity: int, rng: random.Random, **options) -> str:
            return detailed(text, severity, rng, **options).text

        as_text.__wrapped_detailed__ = fn

        as_text.__name__ = fn.__name__
        as_text.__doc__ = fn.__doc__
        register_text_shift(name, severities=severities, level=level, detailed=detailed, needs_model=needs_model,
                            **implementation)(as_text)
        return fn

    return wrap


@contextmanager
def global_rng_from(rng: random.Random) -> Iterator[None]:
    """Seed Python's and NumPy's global generators from ``rng`` for the block; restore them afterwards."""
    seed = rng.getrandbits(63)
    py_state, np_state = random.getstate(), np.random.get_state()
    random.seed(seed)
    np.random.seed(seed % 2**32)
    try:
        yield
    finally:
        random.setstate(py_state)
        np.random.set_state(np_state)


def split_words(text: str) -> list[str]:
    """Whitespace tokens (EDA's split; punctuation stays attached)."""
    return text.split()
