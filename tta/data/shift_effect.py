"""What a run's shifts did to its inputs, the clean reference its rankings are compared with, and the D_q filter
(docs/methods/metrics.md, "Consistency and input distance"; Shirnin et al. Sec. IV-C).

* **Input distance.** Captions: 1 - cosine of the all-MiniLM-L6-v2 sentence embeddings of the clean and the
  perturbed caption (Shirnin et al.'s D_q is that cosine; the encoder of the text shifts' semantic filter,
  :mod:`tta.shifts.text.similarity`); an unchanged caption is at distance 0. Videos: the mean absolute difference of
  the clean and the perturbed native frames the model samples, in [0, 1] (grey levels / 255), measured as the
  stream loads each query (:class:`InputDistances`). The changed share is the share of items the shift altered.
* **Clean reference.** The source model's scores of the clean queries against the clean gallery: what the
  unadapted model answers without any shift. It needs one encoding of the clean side (cached as a gallery of the
  opposite direction) instead of a second run; per-method clean references would need a full clean run of each.
* **D_q filter** (``shift.options.min_similarity``): pairs whose perturbed caption's D_q is below the threshold
  are removed before encoding, for every method alike, and counted in ``skipped`` like screened bad inputs.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

import lightning as L
import torch

from tta.data.readers.msrvtt import VideoTextPair
from tta.data.screen import InputReport
from tta.data.settings import GallerySettings
from tta.data.stream import ShiftSpec
from tta.utils.io import load_cached, save_cached

log = logging.getLogger(__name__)

TEXT_MEASURE = "sentence_cosine_distance"  # 1 - cos(all-MiniLM-L6-v2(clean), all-MiniLM-L6-v2(perturbed))
VIDEO_MEASURE = "pixel_mean_abs_difference"  # mean |clean - perturbed| over the sampled native frames, / 255
FILTER_REASON = "below_min_similarity"
#: what the video record says about Shirnin et al.'s image distance
D_I_ABSENT = ("not measured: Shirnin et al.'s D_i is the cosine of clean and perturbed image features (higher = "
              "closer); this record's pixel distance grows the other way and is no substitute")


# The same inputs give the same result, so both are kept: in memory within one process (a Hydra multirun sweeps
# adapters and seeds over the same shifted streams), and in the run cache on disk across processes (a SLURM sweep runs
# one job per process): the sentence encoder is most of a warm text run's set-up, the clean reference a warm X-Pool
# run's. Keyed by the whole input, so a reused value is bit-identical to a recomputed one.
_MEMO: OrderedDict[tuple, torch.Tensor] = OrderedDict()
MEMO_SIZE = 64
#: enters every key on disk: raise it when what a key covers changes, and older entries are computed again
MEMO_KEY_VERSION = 1
MEMO_FOLDER = "shift_effect"  # in the run cache


def _memo(key: tuple, compute, cache: Path | None = None) -> torch.Tensor:
    """``compute()``, or its value for the same ``key`` from this process or from ``cache`` (written there when
    computed; None: memory only)."""
    if key in _MEMO:
        _MEMO.move_to_end(key)
        return _MEMO[key].clone()
    file = None
    if cache is not None:
        blob = json.dumps([MEMO_KEY_VERSION, *key], default=str).encode()
        file = Path(cache) / MEMO_FOLDER / f"{key[0]}-{hashlib.sha1(blob, usedforsecurity=False).hexdigest()[:20]}.pt"
    value = load_cached(file) if file is not None else None
    if value is None:
        value = compute()
        if file is not None:
            save_cached(file, value)
    _MEMO[key] = value.clone()
    while len(_MEMO) > MEMO_SIZE:
        _MEMO.popitem(last=False)
    return value


def _tensor_digest(t: torch.Tensor) -> str:
    t = t.detach().cpu().contiguous()
    return hashlib.sha1(f"{t.dtype}{tuple(t.shape)}".encode() + t.reshape(-1).view(torch.uint8).numpy().tobytes(),
                        usedforsecurity=False).hexdigest()


def caption_similarities(pairs: Sequence[VideoTextPair], shift: ShiftSpec, batch_size: int = 256,
                         cache: Path | None = None) -> torch.Tensor:
    """(N,) cosine of each perturbed caption's sentence embedding to its clean caption's (exactly 1 when unchanged);
    kept in ``cache`` across processes when given."""
    from tta.shifts.text.similarity import encoder_identity

    clean = [p.caption for p in pairs]
    perturbed = [shift.text(p.caption, p.caption_id or p.video_id) for p in pairs]
    return _memo(("captions", encoder_identity(), tuple(clean), tuple(perturbed), batch_size),
                 lambda: _caption_similarities(clean, perturbed, batch_size), cache)


def _caption_similarities(clean: list[str], perturbed: list[str], batch_size: int) -> torch.Tensor:
    from tta.shifts.text.similarity import sentence_encoder

    out = torch.ones(len(clean))
    todo = [i for i, (a, b) in enumerate(zip(clean, perturbed, strict=True)) if a != b]
    for start in range(0, len(todo), batch_size):
        rows = todo[start:start + batch_size]
        emb = sentence_encoder()([clean[i] for i in rows] + [perturbed[i] for i in rows])
        out[rows] = (emb[:len(rows)] * emb[len(rows):]).sum(dim=1).clamp(-1.0, 1.0)
    return out


def text_change(pairs: Sequence[VideoTextPair], shift: ShiftSpec, similarity: torch.Tensor | None = None,
                cache: Path | None = None) -> dict:
    """The input-change record of a text shift over ``pairs`` (the caption similarities kept in ``cache``)."""
    from tta.shifts.text.similarity import FILTER_ENCODER

    sim = caption_similarities(pairs, shift, cache=cache) if similarity is None else similarity
    changed = [shift.text(p.caption, p.caption_id or p.video_id) != p.caption for p in pairs]
    return {"measure": TEXT_MEASURE, "encoder": FILTER_ENCODER, "num_items": len(pairs),
            "distance_mean": float((1.0 - sim.double()).mean()) if len(pairs) else None,
            "changed_share": sum(changed) / len(pairs) if pairs else None}


def min_similarity_filter(pairs: list[VideoTextPair], report: InputReport, shift: ShiftSpec, side: str,
                          cache: Path | None = None) -> tuple[list[VideoTextPair], dict | None]:
    """Drop the pairs whose perturbed caption has D_q < ``shift.min_similarity`` (Shirnin et al. Sec. IV-C) and
    count them in ``report`` (reason ``below_min_similarity``); returns the kept pairs and the filter record."""
    if shift.min_similarity is None:
        return pairs, None
    sim = caption_similarities(pairs, shift, cache=cache)
    keep = sim >= shift.min_similarity
    kept_rows = [r for r, k in zip(report.kept, keep.tolist(), strict=True) if k]
    for i in (~keep).nonzero().flatten().tolist():
        report.skip(pairs[i], report.kept[i], FILTER_REASON,
                    f"D_q = {float(sim[i]):.3f} < {side}.options.min_similarity = {shift.min_similarity}")
    report.kept = kept_rows
    record = {"min_similarity": shift.min_similarity, "side": side, "num_candidates": len(pairs),
              "filtered": int((~keep).sum()), "filtered_share": int((~keep).sum()) / len(pairs) if len(pairs) else None}
    if not keep.any():
        raise ValueError(f"every pair has D_q below {side}.options.min_similarity={shift.min_similarity} under "
                         f"{shift.name} s{shift.severity}; lower the threshold")
    log.info("D_q filter: %d of %d pairs below min_similarity=%s are excluded (results.json 'query_filter')",
             record["filtered"], len(pairs), shift.min_similarity)
    return [p for p, k in zip(pairs, keep.tolist(), strict=True) if k], record


@torch.no_grad()
def clean_reference(model, layout, gallery: torch.Tensor, task: str, settings: GallerySettings, gallery_shifted: bool,
                    frames, cache: Path, chunk: int = 256) -> torch.Tensor:
    """(Q, CONSISTENCY_K) gallery indices of the source model's best answers to the clean queries against the clean
    gallery, best first, scored in chunks of queries so that memory stays O(Q k), not O(Q G).

    The clean queries are encoded as the clean gallery of the opposite direction (the same cache entry); the clean
    gallery is ``gallery`` itself unless the run shifts it. The torch RNG state is left as it was, so the run's
    own randomness does not depend on whether a reference is computed.
    """
    from tta.data.gallery import encode_gallery, weights_digest
    from tta.metrics.consistency import CONSISTENCY_K, top_answers
    from tta.models.encode import pairwise_similarity

    query_task = "t2v" if task == "v2t" else "v2t"  # the direction whose gallery is this run's query side
    with torch.random.fork_rng(devices=[]):
        queries = encode_gallery(model, layout.queries, query_task, settings, ShiftSpec(), frames, cache)
        if gallery_shifted:
            gallery = encode_gallery(model, layout.gallery, task, settings, ShiftSpec(), frames, cache)
        k = min(CONSISTENCY_K, len(gallery))
        param = next(model.parameters(), None)
        key = ("clean_reference", weights_digest(model), _tensor_digest(queries), _tensor_digest(gallery), task,
               k, chunk, str(param.device if param is not None else "cpu"), settings.precision)

        def answers() -> torch.Tensor:
            out = []
            for i in range(0, len(queries), chunk):
                rows = queries[i:i + chunk]
                sims = (pairwise_similarity(model, gallery, rows).t() if task == "v2t"
                        else pairwise_similarity(model, rows, gallery))
                out.append(top_answers(sims, k))
            return torch.cat(out)

        return _memo(key, answers, cache)


class InputDistances(L.Callback):
    """Collects the per-query pixel distances the video stream measures (``batch["input_distance"]``)."""

    def __init__(self):
        self.values: list[torch.Tensor] = []

    def on_test_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, dataloader_idx=0) -> None:
        if isinstance(batch, dict) and "input_distance" in batch:  # kept where the batch is: read back at the end
            self.values.append(batch["input_distance"].detach())

    def record(self) -> dict | None:
        """The input-change record of the video queries streamed in this process (a resumed run measures only the
        batches it streamed itself: ``num_items`` says how many)."""
        if not self.values:
            return None
        d = torch.cat([v.cpu() for v in self.values]).float()
        measured = d[~d.isnan()]
        return {"measure": VIDEO_MEASURE, "d_i": D_I_ABSENT, "num_items": int(d.numel()), "num_unmeasured": int(d.isnan().sum()),
                "distance_mean": float(measured.mean()) if measured.numel() else None,
                "changed_share": float((measured > 0).float().mean()) if measured.numel() else None}


REFERENCE = "source model, clean queries, clean gallery"


def effect_record(ctx, answers: torch.Tensor, ranks: torch.Tensor) -> dict:
    """The results.json keys of the shift's effect (``consistency``, ``input_change``, ``query_filter``,
    ``gallery_shift``) and the per-category metrics (``by_category``) of a scored stream (R = segments x Q rows;
    ``answers`` (R, >= k) are each row's best gallery indices, best first, -1 in a failed row)."""
    from tta.metrics.categories import metrics_by_category
    from tta.metrics.consistency import answer_consistency

    out: dict = {}
    repeats = len(ctx.shifts)
    if ctx.reference is not None:
        k = ctx.reference.shape[1]
        out["consistency"] = {"reference": REFERENCE,
                              **answer_consistency(answers[:, :k], ctx.reference.repeat(repeats, 1))}
    if ctx.input_change:
        out["input_change"] = ctx.input_change
    if ctx.query_filter is not None:
        out["query_filter"] = ctx.query_filter
    if ctx.gallery_shift is not None and ctx.gallery_shift.name != "clean":
        g = ctx.gallery_shift
        out["gallery_shift"] = {"name": g.name, "severity": g.severity, "options": dict(g.options)}
    categories = [getattr(p, "category", None) for p in ctx.layout.queries] * repeats
    if by_category := metrics_by_category(ranks, categories, ctx.cfg.metrics.median):
        out["by_category"] = by_category
    return out
