"""SwapText of Schiappa et al. (Sec. 3.2): a machine-learning based perturbation that swaps words of the caption for
other words, here their neighbours in a learned word-embedding space.

``swap_text``: n = max(1, ⌊r·n_words⌋) of the caption's content words (r = 0.05·s, s = 1..7, as the EDA word types;
whitespace tokens whose letters form a whole token of the vocabulary, stop words excluded) are chosen by the item's
generator, and each is replaced by one of its ``top_k`` nearest whole-word neighbours (cosine of the input token
embeddings of all-MiniLM-L6-v2, the BERT WordPiece vocabulary; stop words, the word itself and its plural or
singular excluded), also drawn by the generator. Punctuation around a word and its capitalisation are kept.

The paper's appendix (its exact embedding model and neighbour count) is not available; the embedding table is the
one the filter encoder ships (docs/shifts/text.md), so the shift runs offline. Nearest-neighbour lists depend only on
the table, so a caption's output is a pure function of (caption, seed, severity, top_k).
"""

from __future__ import annotations

import math
import random
from functools import lru_cache

import torch

from tta.shifts.text.core import CHAR_SEVERITIES, TextOutcome, outcome, ratio, text_shift
from tta.shifts.text.shirnin import _split, match_case
from tta.shifts.text.word import STOP_WORDS
from tta.utils.bounds import Int

NEIGHBOUR_POOL = 50  # neighbours kept per word; top_k may not exceed it


@lru_cache(maxsize=1)
def embedding_table() -> tuple[list[str], dict[str, int], torch.Tensor, list[int]]:
    """(vocabulary, whole word -> row, L2-normalised input embeddings of the whole vocabulary, the rows of the words
    a swap may insert: alphabetic, ASCII, two letters or more, not stop words)."""
    from transformers import AutoModel, AutoTokenizer

    from tta.models.towers import minilm_path

    path = minilm_path()
    ids = AutoTokenizer.from_pretrained(path, local_files_only=True).get_vocab()
    vocab = [t for t, _ in sorted(ids.items(), key=lambda kv: kv[1])]
    weights = AutoModel.from_pretrained(path, local_files_only=True).get_input_embeddings().weight.detach()
    index = {w: i for i, w in enumerate(vocab) if w.isalpha() and w.isascii()}
    insertable = [i for w, i in index.items() if len(w) >= 2 and w not in STOP_WORDS]
    return vocab, index, torch.nn.functional.normalize(weights.float(), dim=-1), insertable


@lru_cache(maxsize=65536)
def neighbours(word: str) -> tuple[str, ...]:
    """The :data:`NEIGHBOUR_POOL` nearest insertable words of ``word`` by embedding cosine, nearest first, without
    the word itself and its plural or singular (empty when ``word`` is not a whole token of the vocabulary)."""
    vocab, index, table, insertable = embedding_table()
    if word not in index:
        return ()
    rows = torch.tensor(insertable)
    cos = table[rows] @ table[index[word]]
    same = {word, word + "s", word + "es", word[:-1] if word.endswith("s") else word}
    out = []
    for j in torch.argsort(cos, descending=True, stable=True).tolist():
        cand = vocab[insertable[j]]
        if cand not in same:
            out.append(cand)
            if len(out) == NEIGHBOUR_POOL:
                break
    return tuple(out)


@text_shift("swap_text", CHAR_SEVERITIES, "word", bounds={"top_k": Int(1, NEIGHBOUR_POOL)})
def swap_text(text: str, severity: int, rng: random.Random, top_k: int = 10) -> TextOutcome:
    """SwapText: n = max(1, ⌊0.05·s·n_words⌋) content words, each replaced by one of its top_k embedding neighbours."""
    if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= NEIGHBOUR_POOL:
        raise ValueError(f"swap_text top_k must be an integer in [1, {NEIGHBOUR_POOL}], got {top_k!r}")
    words = text.split()
    cores = [_split(w) for w in words]
    units = [i for i, (_, core, _) in enumerate(cores)
             if core.lower() not in STOP_WORDS and neighbours(core.lower())]
    if not units:
        return outcome(text, text)
    n = min(len(units), max(1, math.floor(ratio(severity) * len(words) + 1e-9)))
    for i in sorted(rng.sample(units, n)):
        lead, core, trail = cores[i]
        words[i] = lead + match_case(core, rng.choice(neighbours(core.lower())[:top_k])) + trail
    return outcome(text, " ".join(words))
