"""Run-level resources of the MLVP shifts, built once per run (``tta.run``, ``tta.perturb``).

* ``main_objects``: the dataset's ``{name}_main_objects.json`` (docs/shifts/mlvp.md: main-object metadata; the embedded benchmark writes
  exact boxes), needed by main-object occlusion;
* ``motion_store``: the flow blurs' :class:`~tta.shifts.kernels.motion_store.MotionStore` under ``<cache>/motion/``
  (each clip's high-motion masks and mean flows, computed once and shared by every severity, seed, adapter and
  both flow blurs; the outputs are the same bits with or without it), unless ``motion_store=False``
  (``shift.motion_store=false`` in a run);
* ``donor_pool``: the event-insertion :class:`~tta.shifts.video.donors.DonorPool` (docs/shifts/mlvp.md, App. E.3), train-split videos
  embedded by the run's backbone **before** any adaptation, its embeddings cached under
  ``<cache>/donor_pool/``; ``donor_query_source`` counts how the queries were formed (generated caption or video
  embedding; never a ground-truth caption), read by :func:`tta.shifts.registry.implementation_record`.

Only the resources that the stream's shifts need are built (for a mixed stream, those of every shift its plan
uses).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import torch

from tta.data.registry import dataset_root, load_pairs
from tta.data.screen import BadInputError
from tta.models.encode import ON_CPU, EncodeSetting, PathClips, encode_texts, encode_videos
from tta.shifts.kernels.motion_store import MotionStore
from tta.shifts.video.donors import DonorPool, choose_pool, pool_embeddings
from tta.utils.seeding import derive_seed

log = logging.getLogger(__name__)


def model_digest(model) -> str:
    """A short fingerprint of a model's weights (strided samples of every tensor)."""
    h = hashlib.sha1()
    for k, v in model.state_dict().items():
        if v.numel():
            h.update(k.encode())
            h.update(v.flatten()[:: max(1, v.numel() // 64)].float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def find_main_objects(root: Path, name: str) -> Path | None:
    """``root/{name}_main_objects.json``, else the only ``*_main_objects.json`` in ``root``."""
    file = root / f"{name}_main_objects.json"
    if file.is_file():
        return file
    found = sorted(root.glob("*_main_objects.json"))
    return found[0] if len(found) == 1 else None


def load_main_objects(data_cfg, cache: Path) -> dict:
    """{video id: main-objects entry (docs/shifts/mlvp.md)} of the dataset, or {} (with a warning) when it has no main-objects file."""
    root = dataset_root(data_cfg, cache)
    file = find_main_objects(root, data_cfg.name)
    if file is None:
        log.warning("no *_main_objects.json in %s: main-object occlusion needs shift.options.fallback=saliency|centre",
                    root)
        return {}
    return json.loads(file.read_text())


@torch.no_grad()
def build_donor_pool(model, data_cfg, test_pairs: Sequence, frames, cache: Path, seed: int, options: dict,
                     main_objects: dict, setting: EncodeSetting = ON_CPU) -> DonorPool:
    """The event-insertion donor pool of a run (see :mod:`tta.shifts.video.donors`), encoded as ``setting`` says."""

    pool_size = int(options.get("pool_size", 2000))
    query = options.get("query", "caption_text")
    if query not in ("caption_text", "video"):
        raise ValueError(f"event_insertion query must be caption_text or video, got {query!r}")
    fallback = options.get("caption_fallback", "video")
    if fallback != "video":
        raise ValueError(f"event_insertion caption_fallback must be video, got {fallback!r} (a donor chosen with the "
                         "ground-truth caption carries the answer into the query; docs/shifts/mlvp.md)")
    train = load_pairs(data_cfg, "train", cache)
    chosen = [train[i] for i in choose_pool([p.video_id for p in train], pool_size, derive_seed(seed, "donor_pool"))]
    test_ids = {p.video_id for p in test_pairs}
    chosen = [p for p in chosen if p.video_id not in test_ids]
    if not chosen:
        raise ValueError("event_insertion: the train split has no video for the donor pool")

    def encode(paths: list[str]) -> torch.Tensor:  # (n, D): the mean of the per-frame features, not normalised
        load = PathClips(frames, paths, model.image_size)
        return encode_videos(model, load, len(paths), batch_size=64, setting=setting,
                             progress="donor pool: encoding train videos").mean(dim=1)

    digest = model_digest(model)
    # one call over the whole pool: one set of loader workers decodes it while the model encodes
    emb = pool_embeddings([p.video_path for p in chosen], encode,
                          cache / "donor_pool" / f"{data_cfg.name}-{digest}-{len(chosen)}.pt", batch=len(chosen))
    sources = query_sources(test_pairs, main_objects, query)
    q: dict[str, torch.Tensor] = {}
    texts = [(p, generated_caption(main_objects, p.video_id)) for p in test_pairs
             if sources[p.video_id] == "generated_caption"]
    if texts:
        q.update(zip([p.video_id for p, _ in texts], encode_texts(model, [t for _, t in texts],
                                                                                setting=setting), strict=True))
    clips = [p for p in test_pairs if sources[p.video_id] == "video_embedding"]
    if clips:
        q.update(zip([p.video_id for p in clips], encode([p.video_path for p in clips]), strict=True))
    counts = dict(Counter(sources.values()))
    log.info("donor pool: %d train videos, %s queries for %d test videos (%s)", len(chosen), query, len(test_pairs),
             counts)
    pool_captions = captions_by_video(train)
    return DonorPool([p.video_path for p in chosen], [p.video_id for p in chosen], emb, {query: q},
                     query_sources=sources,
                     excluded=answer_donors(test_pairs, [pool_captions[p.video_id] for p in chosen]))


def normalise_caption(text: str) -> str:
    """Lower case, single spaces, no trailing full stop: two captions are the same text when these are equal."""
    return " ".join(text.lower().split()).rstrip(" .")


def captions_by_video(pairs: Sequence) -> dict[str, set[str]]:
    """{video id: its normalised captions}."""
    out: dict[str, set[str]] = {}
    for p in pairs:
        out.setdefault(p.video_id, set()).add(normalise_caption(p.caption))
    return out


def answer_donors(test_pairs: Sequence, pool_captions: Sequence[set[str]]) -> dict[str, list[int]]:
    """{test video id: positions of the pool videos that carry one of its ground-truth captions}.

    Such a pool video shows the answer itself (the pool overlaps the test content), so it may never be the donor."""
    gt = captions_by_video(test_pairs)
    by_caption: dict[str, list[int]] = {}
    for i, caps in enumerate(pool_captions):
        for c in caps:
            by_caption.setdefault(c, []).append(i)
    return {v: sorted({i for c in caps for i in by_caption.get(c, ())}) for v, caps in gt.items()
            if any(c in by_caption for c in caps)}


def generated_caption(main_objects: dict, video_id: str) -> str | None:
    """The generated caption (``video_caption`` of the main-objects JSON; docs/shifts/mlvp.md) of a video, or None."""
    return (main_objects.get(video_id.replace("/", "_")) or {}).get("video_caption") or None


def query_sources(test_pairs: Sequence, main_objects: dict, query: str) -> dict[str, str]:
    """{test video id: generated_caption | video_embedding}: how its donor query is formed.

    A "generated" caption that is one of the video's ground-truth captions is no generated caption (the embedded
    benchmark writes its own test caption there): a donor chosen with it would match the answer, so the video
    embedding is the query instead, as for a video without a generated caption."""
    if query == "video":
        return {p.video_id: "video_embedding" for p in test_pairs}
    gt = captions_by_video(test_pairs)
    out = {}
    for v in gt:
        cap = generated_caption(main_objects, v)
        out[v] = "generated_caption" if cap and normalise_caption(cap) not in gt[v] else "video_embedding"
    return out


def motion_store_enabled(shift_cfg) -> bool:
    """``shift.motion_store`` of a run or perturb config (default true), checked: one line for anything else."""
    value = shift_cfg.get("motion_store", True)
    if not isinstance(value, bool):
        raise BadInputError(f"shift.motion_store must be true or false, got {value!r}")
    return value


def build_resources(shift, model, data_cfg, test_pairs: Sequence, frames, cache: Path,
                    setting: EncodeSetting = ON_CPU, motion_store: bool = True) -> dict:
    """The resources dict for ``shift`` (a :class:`tta.data.stream.ShiftSpec`) over ``test_pairs``; the donor pool
    is encoded as ``setting`` says (the run's Trainer device and precision)."""
    plan = shift.plan([p.video_id for p in test_pairs])
    used = {name for _, name, _ in plan}
    resources: dict = {}
    if motion_store and used & {"motion_blur", "video_defocus"}:
        resources["motion_store"] = MotionStore(cache / "motion")
    if used & {"main_object_occlusion", "event_insertion"}:
        resources["main_objects"] = load_main_objects(data_cfg, cache)
    if "event_insertion" in used:
        opts = dict(shift.options)
        if shift.name == "mixed_severity":  # the base's options
            opts = dict(opts.get("shift_options") or {})
        elif shift.name == "mixed_types":  # per-type options
            opts = dict((opts.get("shift_options") or {}).get("event_insertion") or {})
        resources["donor_pool"] = build_donor_pool(model, data_cfg, test_pairs, frames, cache, shift.seed, opts,
                                                   resources["main_objects"], setting)
        resources["donor_query"] = opts.get("query", "caption_text")
        resources["donor_query_source"] = dict(Counter(resources["donor_pool"].query_sources.values()))
    return resources
