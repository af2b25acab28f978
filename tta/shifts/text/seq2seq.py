"""The sentence-level shifts with real models: a hook for local translation / style-transfer checkpoints
(docs/shifts/text.md: sentence level).

``back_translation``, ``formal``, ``casual``, ``passive`` and ``active`` run only when ``model_path`` points at a
local transformers seq2seq checkpoint (nothing is downloaded: ``local_files_only``):

- ``back_translation``: ``model_path`` = English→pivot (e.g. ``facebook/wmt19-en-de`` or a MarianMT
  ``opus-mt-en-de`` directory), ``reverse_model_path`` = pivot→English; decoding follows each checkpoint's
  generation config (beam search for WMT19), deterministic; no filter (docs/shifts/text.md, sentence level).
- ``formal`` / ``casual`` / ``passive`` / ``active``: a Styleformer T5 checkpoint
  (``prithivida/{informal_to_formal,formal_to_informal,active_to_passive,passive_to_active}_styletransfer``)
  prompted with Styleformer's prefix, sampled with top-k 50, top-p 0.95, at most 32 tokens (docs/shifts/text.md, sentence level), then the
  semantic filter (docs/shifts/text.md, semantic filter), each retry a new sample. **Deviation:** Styleformer generates several candidates and
  re-ranks them by an adequacy model (``prithivida/parrot_adequacy_model``) before returning one, for
  formal/casual; that re-ranking is not reproduced here (the semantic filter keeps the first sample with cosine ≥
  the threshold instead), so outputs can be less faithful to the caption than Styleformer's. Runs record it
  (``shift_implementation.deviation``, :func:`tta.shifts.registry.implementation_record`). Sampling is seeded from the item's generator (torch's global state is forked).

Without ``model_path`` these raise an error pointing at the rule-based ``*_approx`` shifts
(:mod:`tta.shifts.text.sentence`). Caption files made elsewhere with the real models can be used as well.
"""

from __future__ import annotations

import random
from functools import lru_cache
from pathlib import Path

import torch

from tta.shifts.registry import register_check
from tta.shifts.text.core import SENTENCE_SEVERITIES, TextOutcome, outcome, text_shift
from tta.shifts.text.similarity import FILTER_BOUNDS, filter_options, semantic_filter
from tta.utils.bounds import Int

REVERSE_MISSING = "back_translation needs shift.options.reverse_model_path (the pivot→English model)"
STYLE_PREFIX = {"formal": "transfer Casual to Formal: ", "casual": "transfer Formal to Casual: ",
                "passive": "transfer Active to Passive: ", "active": "transfer Passive to Active: "}


@lru_cache(maxsize=4)
def load_seq2seq(path: str, device: str = "cpu"):
    """(tokenizer, model) of a local seq2seq checkpoint, cached per process."""
    from transformers import AutoModelForSeq2SeqLM, AutoTokenizer

    try:
        tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
        model = AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True).eval().to(device)
    except OSError as e:
        raise FileNotFoundError(f"no transformers seq2seq checkpoint at {path!r} (shift.options.model_path): {e}") from e
    return tok, model


def _device(device: str) -> str:
    return ("cuda" if torch.cuda.is_available() else "cpu") if device == "auto" else device


def generate(path: str, text: str, rng: random.Random, *, prefix: str = "", device: str = "cpu", **gen) -> str:
    """One decoded output of the model at ``path`` for ``prefix + text``; sampling seeded from ``rng``."""
    tok, model = load_seq2seq(path, _device(device))
    batch = tok([prefix + text], return_tensors="pt", truncation=True).to(model.device)
    with torch.random.fork_rng(devices=[]), torch.inference_mode():
        torch.manual_seed(rng.getrandbits(63))
        ids = model.generate(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                             **{k: v for k, v in gen.items() if v is not None})
    return tok.decode(ids[0], skip_special_tokens=True).strip()


def _local_model(key: str, path) -> None:
    """A one-line error unless ``path`` is a local directory or a model id already in the Hugging Face cache
    (the checkpoints load with ``local_files_only``)."""
    if Path(path).is_dir():
        return
    try:
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(str(path), "config.json"), str):
            return
    except Exception:  # noqa: BLE001 - not a valid model id: the error below says what to give
        pass
    raise FileNotFoundError(f"shift.options.{key}={path} is neither a directory nor a model in the Hugging Face "
                            f"cache; give the directory of a local transformers checkpoint")


def _check_model_options(name: str):
    def check(options: dict) -> None:
        _local_model("model_path", _need(name, options.get("model_path")))
        if name == "back_translation":
            if not options.get("reverse_model_path"):
                raise ValueError(REVERSE_MISSING)
            _local_model("reverse_model_path", options["reverse_model_path"])
    return check


def _need(name: str, model_path) -> str:
    if not model_path:
        raise ValueError(f"the shift {name!r} runs a real model and needs shift.options.model_path (a local "
                         f"transformers checkpoint); without one run the rule-based approximation shift={name}_approx")
    return str(model_path)


@text_shift("back_translation", SENTENCE_SEVERITIES, "sentence", needs_model=True)
def back_translation(text: str, severity: int, rng: random.Random, model_path=None, reverse_model_path=None,
                     num_beams: int | None = None, max_length: int = 300, device: str = "cpu") -> TextOutcome:
    """Back-translation through a pivot language with two local models (docs/shifts/text.md, sentence level; WMT19 en→de→en in the paper)."""
    fwd = _need("back_translation", model_path)
    if not reverse_model_path:
        raise ValueError(REVERSE_MISSING)
    if not text.strip():
        return outcome(text, text)
    mid = generate(fwd, text, rng, num_beams=num_beams, max_length=max_length, device=device)
    back = generate(str(reverse_model_path), mid, rng, num_beams=num_beams, max_length=max_length, device=device)
    return outcome(text, back or text)  # an empty output keeps the original (docs/shifts/text.md, sentence level)


def _style(name: str) -> None:
    def fn(text: str, severity: int, rng: random.Random, model_path=None, prefix: str | None = None,
           max_length: int = 32, top_k: int = 50, top_p: float = 0.95, device: str = "cpu",
           drop_article: bool = False, **options) -> TextOutcome:  # drop_article: casual_approx only
        path = _need(name, model_path)
        filt = filter_options(options)
        if options:
            raise TypeError(f"unknown options for {name}: {sorted(options)}")
        if not text.strip():
            return TextOutcome(text, 0, 1.0, False, True)
        pre = STYLE_PREFIX[name] if prefix is None else prefix

        def draw() -> str:
            return generate(path, text, rng, prefix=pre, do_sample=True, top_k=top_k, top_p=top_p,
                            max_length=max_length, device=device)

        return semantic_filter(text, draw, **filt)

    fn.__name__ = name
    fn.__doc__ = f"Styleformer-style {name} transfer with a local T5 checkpoint, then the semantic filter (docs/shifts/text.md: sentence level; semantic filter)."
    text_shift(name, SENTENCE_SEVERITIES, "sentence", needs_model=True, deviation=RERANK_DEVIATION.get(name),
               bounds={**FILTER_BOUNDS, "top_k": Int(1)})(fn)


#: Styleformer's adequacy re-ranking is reproduced for none of the style shifts; recorded where it changes the output
RERANK_DEVIATION = {name: "Styleformer re-ranks its candidates by an adequacy model; that re-ranking is not reproduced "
                          "(the semantic filter picks the first candidate with cosine >= threshold)"
                    for name in ("formal", "casual")}

for _name in STYLE_PREFIX:
    _style(_name)
for _name in ["back_translation", *STYLE_PREFIX]:
    register_check(_name)(_check_model_options(_name))
