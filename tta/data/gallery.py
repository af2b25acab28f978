"""The gallery of a run: encoded once by the source model (no grad) and cached on disk across runs and shifts.

The cache key covers the checkpoint's weights, the dataset config, the side, the gallery's shift (or the identity of
the perturbed copy it is read from), the items in order, the device type and precision, so two runs share a gallery
only when it would come out the same. Encoding runs on the Trainer's device and precision
(:class:`tta.models.encode.EncodeSetting`); in a process group of several ranks each rank encodes its shard and
every rank gets the whole gallery (:func:`tta.models.encode.gather_shards`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import weakref
from pathlib import Path

import torch
from omegaconf import DictConfig, OmegaConf

from tta.data.cache import FrameCache
from tta.data.settings import GallerySettings
from tta.data.stream import PerturbedCopy, ShiftSpec, TextItems, VideoItems
from tta.models.encode import ON_CPU, EncodeSetting, encode_texts, encode_videos, gather_shards, shard
from tta.models.retrieval import RetrievalModel
from tta.utils.io import load_cached, save_cached
from tta.utils.reuse import file_identity, forget, reuse

log = logging.getLogger(__name__)
#: enters every gallery key: raise it when what a key covers changes, and entries of older versions are not found
#: (they are encoded again) instead of being read as something else
GALLERY_KEY_VERSION = 2


def weights_digest(model: torch.nn.Module) -> str:
    """Hash of every byte of ``model``'s state dict (names, dtypes, shapes, raw buffers) in sorted name order: two
    models share it only when their weights are identical. Hashes the buffers in place, without copies.

    Remembered per model while its tensors stay as they were (a run's set-up asks up to four times, 0.3 s each at
    ViT-B/32): :func:`_fingerprint` changes with any in-place update, load, move, cast or replaced tensor."""
    fingerprint = _fingerprint(model)
    known = _DIGESTS.get(model)
    if known is not None and known[0] == fingerprint:
        return known[1]
    digest = _hash_state(model)
    _DIGESTS[model] = (fingerprint, digest)
    return digest


#: {model: (fingerprint, digest)}, forgotten with the model
_DIGESTS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _fingerprint(model: torch.nn.Module) -> tuple:
    """Each parameter's and buffer's object, storage address and version counter (bumped by every in-place write)."""
    return tuple((name, id(t), t.data_ptr(), t._version, t.dtype, tuple(t.shape), t.device)
                 for name, t in (*model.named_parameters(remove_duplicate=False),
                                 *model.named_buffers(remove_duplicate=False)))


def _hash_state(model: torch.nn.Module) -> str:
    digest = hashlib.sha1(usedforsecurity=False)  # SHA-1: the CPU's SHA instructions make it the fastest full hash
    state = model.state_dict()
    for name in sorted(state):
        t = state[name].detach()
        digest.update(f"{name}\t{t.dtype}\t{tuple(t.shape)}\n".encode())
        if t.numel():  # through uint8: numpy has no bfloat16, and a 0-d tensor cannot change its element size
            digest.update(t.cpu().contiguous().reshape(-1).view(torch.uint8).numpy().data)
    return digest.hexdigest()


def gallery_key(model: RetrievalModel, data_cfg, side: str, shift: ShiftSpec, pairs,
                copy: PerturbedCopy | None = None, setting: EncodeSetting = ON_CPU) -> str:
    """The cache key of the ``side`` gallery of ``pairs`` (in order) under ``shift`` (or read from ``copy``),
    encoded by ``model`` as ``setting`` says; ``data_cfg`` is the dataset config."""
    data = dict(OmegaConf.to_container(data_cfg, resolve=True) if isinstance(data_cfg, DictConfig) else data_cfg)
    data.pop("split", None)  # the items below already name the split
    ids = (p.video_id if side == "video" else f"{p.caption_id}\t{p.caption}" for p in pairs)  # which items, in order
    items = hashlib.sha1("\n".join(ids).encode()).hexdigest()
    shifted = shift.name != "clean"  # a clean gallery is the same whatever the options and the shifts' device
    precision = "32-true" if setting.precision == "32" else setting.precision  # two names of one precision
    key = [GALLERY_KEY_VERSION, weights_digest(model), data, side, shift.name, shift.severity, shift.seed, len(pairs),
           items, [list(o) for o in shift.options] if shifted else [],
           shift.device if shifted else "cpu",  # GPU kernels may round 1 grey level apart from the CPU's
           ["from_copy", copy_identity(copy)] if copy is not None else None,
           [torch.device(setting.device).type, precision]]
    if setting.transform_on_device and copy is None and torch.device(setting.device).type != "cpu":
        key.append("transform on the device")  # a GPU may resample apart from the CPU in the last bits; a CPU does not
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:16]


def copy_identity(copy: PerturbedCopy) -> str | None:
    """What a perturbed copy holds, from its manifest (shift, severity, seed, options, source, format); the write
    counts change when ``tta.perturb`` resumes, not the copy, so they stay out. None when the manifest does not pin
    the content: event-insertion donors were picked by a model it names only by name."""
    if copy.manifest.get("donor_pool"):
        return None
    manifest = {k: v for k, v in copy.manifest.items() if k not in ("written", "skipped")}
    return hashlib.sha1(json.dumps(manifest, sort_keys=True, default=str).encode()).hexdigest()


def encode_gallery(model: RetrievalModel, pairs, task: str, settings: GallerySettings, shift: ShiftSpec,
                   frames: FrameCache, cache: Path, copy: PerturbedCopy | None = None) -> torch.Tensor:
    """Gallery features of the ``task`` direction by the source model, no grad: (G, D) captions for v2t, (G, T, D)
    frames for t2v.

    ``shift`` applies only when it is of the gallery's modality (a video shift on a t2v gallery).
    """
    side = "text" if task == "v2t" else "video"
    gshift = shift if shift.kind == side else ShiftSpec()
    gcopy = copy if shift.kind == side else None
    setting = settings.encode_setting(None if side == "video" else 0)
    file = cache / "gallery" / f"{side}-{gallery_key(model, settings.data, side, gshift, pairs, gcopy, setting)}.pt"
    cacheable = gcopy is None or copy_identity(gcopy) is not None
    if cacheable and (cached := _read_gallery(file)) is not None:
        return cached
    start = time.time()
    rank, world = process_group()
    mine = shard(len(pairs), rank, world)
    if side == "text":
        items = TextItems(pairs, gshift, gcopy)
        feats = encode_texts(model, [items.text(i) for i in mine], setting=setting, progress="encoding the text gallery")
    else:
        items = VideoItems(pairs, frames, model.image_size, gshift, gcopy)
        if gcopy is None:
            frames.warm([pairs[i].video_path for i in mine], "decoding gallery videos", setting.workers)
        feats = encode_videos(model, items.loader(setting.transform_on_device), len(pairs), setting=setting, items=mine,
                              progress="encoding the video gallery")
    if world > 1:
        feats = gather_shards(feats, len(pairs))
    _check_finite(feats, pairs, side, settings.checkpoint)
    if rank == 0 and cacheable:
        save_cached(file, feats)
    log.info("encoded the %s gallery (%d items, %s, %s, %d rank(s)) in %.1f s; %s", side, len(pairs), setting.device,
             setting.precision, world, time.time() - start, f"cached at {file}" if cacheable else "not cached")
    return feats


def _read_gallery(file: Path) -> torch.Tensor | None:
    """The cached gallery in ``file`` (from memory when this process read the same file before), or None."""
    if not file.exists():
        return None
    try:
        key = file_identity(file)
    except FileNotFoundError:  # removed meanwhile: encoded again
        return None
    kept = reuse("gallery", key, lambda: load_cached(file), lambda t: None if t is None else t.clone())
    if kept is None:  # a damaged entry (removed by load_cached): nothing kept under its identity
        forget("gallery", key)
    return kept


def process_group() -> tuple[int, int]:
    """(rank, world size) of the initialised torch.distributed group, (0, 1) without one."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _check_finite(feats: torch.Tensor, pairs, side: str, checkpoint: str) -> None:
    bad = (~torch.isfinite(feats.reshape(len(pairs), -1)).all(dim=1)).nonzero().flatten().tolist()
    if bad:
        ids = [pairs[i].video_id if side == "video" else pairs[i].caption_id for i in bad[:5]]
        raise FloatingPointError(f"the source model gives NaN/inf features for {len(bad)} {side} gallery item(s) "
                                 f"(e.g. {ids}); the checkpoint ({checkpoint}) or these inputs are broken "
                                 "- no metric would be valid")
