"""The test-time query stream and the gallery (docs/methods/protocol.md, "Gallery", "Stream and batches").

Queries stream in dataset file order, batches of 16, no shuffling, the last partial batch kept. A shift acts on
its own modality: a video shift perturbs the videos and a text shift the captions — on the query side in the
paper's query-shift setting (v2t + video shift, t2v + text shift), on the gallery side otherwise (e.g.
``task=t2v shift=gaussian`` is a gallery shift: captions query noisy videos). Each item's randomness is seeded by
(seed, item id, shift, severity) (:func:`tta.shifts.item_seed`), so results do not depend on batch order.

Video shifts act on the native frames in MLVP's order (docs/shifts/mlvp.md): a group-A shift gets the uniform
frames from the frame cache; a group-B shift gets every decoded frame of the file (and its frame rate) and the
uniform rule is applied to what it returns, padded with the last frame; the CLIP transform comes last. The flow
blurs, once the run's motion store links a clip to its motion, take the frame cache's frames instead and the video
is not decoded (:mod:`tta.shifts.kernels.motion_store`; the same output).
Mixed streams (``mixed_severity``, ``mixed_types``) resolve to one (shift, severity) per item first. A perturbed
copy written by ``python -m tta.perturb`` (:class:`PerturbedCopy`) replaces on-the-fly perturbation.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.utils.data import Dataset, default_collate

from tta.data.cache import FrameCache
from tta.data.readers.msrvtt import VideoTextPair
from tta.media.frames import uniform_frame_indices
from tta.media.transforms import clip_transform, pad_frames, stack_if_alike
from tta.shifts import item_seed, perturb_text, perturb_video, shift_kind
from tta.shifts.registry import get_shift
from tta.shifts.video.common import ShiftContext, WholeVideoNeeded
from tta.shifts.video.mixed import is_mixed, resolve_mixed


@dataclass(frozen=True)
class ShiftSpec:
    """A shift as a run sees it: ``name`` (``clean`` = none), ``severity`` and shift-specific options.

    ``resources`` holds run-level objects some shifts need: ``main_objects`` ({video id: main-objects entry}) and
    ``donor_pool`` (:class:`tta.shifts.video.donors.DonorPool`).
    """

    name: str = "clean"
    severity: int = 0
    seed: int = 42
    options: tuple = ()
    resources: dict = field(default_factory=dict, compare=False, repr=False)
    device: str = field(default="cpu", compare=False)  # where video shifts run (``shift.device``, resolved)
    min_similarity: float | None = None  # the D_q filter of the run's pairs (tta/data/shift_effect.py); None = off

    @property
    def kind(self) -> str:
        return shift_kind(self.name)

    def resolve(self, item_id: str) -> tuple[str, int, dict]:
        """The concrete (shift, severity, options) applied to one item (differs per item for mixed streams)."""
        if is_mixed(self.name):
            return resolve_mixed(self.name, dict(self.options), self.seed, item_id)
        return self.name, self.severity, dict(self.options)

    def plan(self, item_ids: Sequence[str]) -> list[tuple[str, str, int]]:
        """[(item id, shift, severity)] of a stream, in order."""
        return [(i, *self.resolve(i)[:2]) for i in item_ids]

    def context(self, video_id: str, num_frames: int = 12, caption: str | None = None) -> ShiftContext:
        objects = self.resources.get("main_objects") or {}
        return ShiftContext(video_id=video_id, num_frames=num_frames, caption=caption,
                            main_objects=objects.get(video_id.replace("/", "_")), resources=self.resources)

    def video(self, frames: torch.Tensor, video_id: str, context: ShiftContext | None = None) -> torch.Tensor:
        """Shift already-decoded frames (the group-A path; :meth:`native` handles group B from the file)."""
        name, severity, options = self.resolve(video_id)
        if shift_kind(name) != "video":
            return frames
        seed = item_seed(self.seed, video_id, name, severity)
        ctx = context or self.context(video_id, frames.shape[0])
        return perturb_video(frames.to(self.device), name, severity, seed, context=ctx, **options).cpu()

    def native(self, pair: VideoTextPair, frames: FrameCache, clean: torch.Tensor | None = None) -> torch.Tensor:
        """The clip's native-resolution frames after the shift: uint8 (num_frames, H, W, 3) (docs/shifts/mlvp.md).
        ``clean``: ``frames.get(pair.video_path)`` where the caller has read it already (copied here: a shift may
        write into its input)."""
        name, severity, options = self.resolve(pair.video_id)
        clip = (lambda: clean.clone() if clean is not None else frames.get(pair.video_path))  # noqa: E731
        if shift_kind(name) != "video":
            return clip()
        n = frames.num_frames
        ctx = self.context(pair.video_id, n, pair.caption)
        seed = item_seed(self.seed, pair.video_id, name, severity)
        if get_shift(name).group == "A":
            ctx.frame_indices = frames.indices(pair.video_path)
            return perturb_video(clip().to(self.device), name, severity, seed, context=ctx, **options).cpu()
        if get_shift(name).accepts_sampled and self.resources.get("motion_store") is not None \
                and options.get("apply_at", "native") == "native":
            # the flow blurs with their motion stored need only the frame cache's frames: no decode of the video
            ctx.clip_key, ctx.clip = frames.key(pair.video_path), clip()
            try:
                return perturb_video(ctx.clip.to(self.device), name, severity, seed,
                                     context=dataclasses.replace(ctx, sampled=True), **options).cpu()
            except WholeVideoNeeded:
                pass
        full, ctx.fps = frames.decode_all(pair.video_path)
        out = perturb_video(full.to(self.device), name, severity, seed, context=ctx, **options).cpu()
        return pad_frames(out[uniform_frame_indices(out.shape[0], n)], n)

    def text(self, caption: str, caption_id: str) -> str:
        if self.kind != "text":
            return caption
        seed = item_seed(self.seed, caption_id, self.name, self.severity)
        return perturb_text(caption, self.name, self.severity, seed, **dict(self.options))


class PerturbedCopy:
    """A perturbed copy of a dataset written by ``python -m tta.perturb`` (one shift and severity).

    Layout: ``root/manifest.json``; videos as ``root/<video id>.npy`` (uint8 native frames (T, H, W, 3), the
    default) or ``root/<video id>.pt`` (``{"video": float32 (T, 3, S, S) normalised, "video_id"}``, MLVP's own
    format, docs/shifts/mlvp.md); captions as ``root/captions.json`` (a list of ``[video id, text]``).
    ``shift`` and ``max_side`` (the run's ``inputs.max_side``; ``"any"`` skips the check) must be the copy's.
    """

    def __init__(self, root: str | Path, shift: ShiftSpec | None = None, max_side: int | None | str = "any"):
        self.root = Path(root)
        file = self.root / "manifest.json"
        if not file.is_file():
            raise FileNotFoundError(f"{file} not found: shift.from_copy must be a directory written by "
                                    "`python -m tta.perturb` (e.g. <out>/<data>/<shift>_<severity>)")
        self.manifest = json.loads(file.read_text())
        if shift is not None:
            want = {"shift": shift.name, "severity": shift.severity, "seed": shift.seed, "options": dict(shift.options)}
            have = {k: self.manifest.get(k) for k in want}
            if have != want:
                raise ValueError(f"perturbed copy {self.root} holds {have}, but the run asks for {want}")
        if max_side != "any" and "max_side" in self.manifest and self.manifest["max_side"] != max_side:
            raise ValueError(f"perturbed copy {self.root} was written with inputs.max_side={self.manifest['max_side']}"
                             f" but the run has {max_side}: write it again with inputs.max_side={max_side}, or run "
                             f"with inputs.max_side={self.manifest['max_side']}")
        self._captions: dict[str, str] | None = None

    def clip(self, video_id: str, size: int) -> torch.Tensor:
        npy, pt = self.root / f"{video_id}.npy", self.root / f"{video_id}.pt"
        if npy.is_file():
            return clip_transform(torch.from_numpy(np.load(npy)), size)
        if pt.is_file():
            video = torch.load(pt)["video"]
            if video.shape[-1] != size:
                raise ValueError(f"{pt} holds {video.shape[-1]}-px clips but the model needs {size}; write the copy "
                                 "with format=npy (model-independent) or the model's image size")
            return video
        raise FileNotFoundError(f"{video_id} is missing from the perturbed copy {self.root}; run tta.perturb again "
                                "(it resumes)")

    def text(self, video_id: str) -> str:
        if self._captions is None:
            file = self.root / "captions.json"
            if not file.is_file():
                raise FileNotFoundError(f"{file} not found: the copy has no perturbed captions")
            self._captions = dict(json.loads(file.read_text()))
        return self._captions[video_id]


class VideoItems(Dataset):
    """Normalised clips (T, 3, S, S) of a list of pairs, with the shift applied to the native frames first.

    ``native=True`` leaves the CLIP transform to the model's device (:func:`tta.media.transforms.clip_transform_batch`
    after the copy): an item then carries its shifted native frames (``native``), about a sixteenth of the bytes of a
    224-px float clip to pass between processes and over the bus, and the workers skip the resize.
    """

    def __init__(self, pairs: Sequence[VideoTextPair], frames: FrameCache, image_size: int, shift: ShiftSpec,
                 copy: PerturbedCopy | None = None, native: bool = False):
        self.pairs, self.frames, self.size, self.shift, self.copy = pairs, frames, image_size, shift, copy
        self.native = native and copy is None

    def __len__(self) -> int:
        return len(self.pairs)

    def clip(self, i: int) -> torch.Tensor:
        p = self.pairs[i]
        if self.copy is not None:
            return self.copy.clip(p.video_id, self.size)
        return clip_transform(self.shift.native(p, self.frames), self.size)

    def native_clip(self, i: int) -> torch.Tensor:
        """The shifted native frames (T, H, W, 3) uint8 of item i, for :func:`tta.models.encode.encode_videos` to
        transform on its device; a perturbed copy's clip comes transformed, as it is stored."""
        if self.copy is not None:
            return self.clip(i)
        return self.shift.native(self.pairs[i], self.frames)

    def loader(self, on_device: bool):
        """``load(i)`` for :func:`tta.models.encode.encode_videos`: native frames when the transform runs on its
        device (``EncodeSetting.transform_on_device``), else the transformed clip."""
        return self.native_clip if on_device else self.clip

    def __getitem__(self, i: int) -> dict:
        start = time.perf_counter()
        if self.copy is not None or self.shift.kind != "video":
            item = {"index": i, **({"native": self.frames.get(self.pairs[i].video_path)} if self.native
                                   else {"video": self.clip(i)})}
        else:
            clean = self.frames.get(self.pairs[i].video_path)
            native = self.shift.native(self.pairs[i], self.frames, clean)
            item = {"index": i, "input_distance": pixel_distance(clean, native),
                    **({"native": native} if self.native else {"video": clip_transform(native, self.size)})}
        item["load_s"] = time.perf_counter() - start
        return item


def pixel_distance(clean: torch.Tensor, shifted: torch.Tensor) -> float:
    """Mean absolute difference of two uint8 clips on the CPU (the frame cache's and :meth:`ShiftSpec.native`'s) in
    [0, 1]; NaN when a shift changed the frame size.

    |a - b| is max - min, which stays in uint8, and the sum is exact in int64: a loader worker pays it for every
    query video, and float copies of a native-size clip cost several times more (docs/results/shift-speed.md)."""
    if clean.shape != shifted.shape:
        return float("nan")
    if clean.dtype != torch.uint8 or shifted.dtype != torch.uint8:
        raise TypeError(f"pixel_distance takes uint8 clips, got {clean.dtype} and {shifted.dtype}")
    a, b = clean.numpy(), shifted.numpy()
    diff = np.maximum(a, b)
    diff -= np.minimum(a, b)
    return int(diff.sum(dtype=np.int64)) / diff.size / 255.0


class TextItems(Dataset):
    """Captions of a list of pairs, with the text shift applied."""

    def __init__(self, pairs: Sequence[VideoTextPair], shift: ShiftSpec, copy: PerturbedCopy | None = None):
        self.pairs, self.shift, self.copy = pairs, shift, copy

    def __len__(self) -> int:
        return len(self.pairs)

    def text(self, i: int) -> str:
        p = self.pairs[i]
        if self.copy is not None:
            return self.copy.text(p.video_id)
        return self.shift.text(p.caption, p.caption_id or p.video_id)

    def __getitem__(self, i: int) -> dict:
        start = time.perf_counter()
        return {"index": i, "text": self.text(i), "load_s": time.perf_counter() - start}


class Collate:
    """Batches stream items; captions are tokenised here with the model's tokenizer."""

    def __init__(self, tokenizer=None):
        self.tokenizer = tokenizer

    def __call__(self, items: list[dict]) -> dict:
        start = time.perf_counter()
        out = {"index": torch.tensor([it["index"] for it in items], dtype=torch.long)}
        if "video" in items[0]:  # default_collate stacks straight into shared memory in a loader worker: the batch
            out["video"] = default_collate([it["video"] for it in items])  # reaches the main process without a copy
        if "native" in items[0]:  # shifted native frames: the CLIP transform runs after the copy to the device
            out["native"] = stack_if_alike([it["native"] for it in items])
        if "input_distance" in items[0]:  # measured per shifted video query (tta/data/shift_effect.py)
            out["input_distance"] = torch.tensor([it["input_distance"] for it in items], dtype=torch.float64)
        if "text" in items[0]:
            out["text"] = [it["text"] for it in items]
            out["tokens"] = self.tokenizer(out["text"])
        if "feats" in items[0]:  # precomputed query features (data=features)
            out["feats"] = torch.stack([it["feats"] for it in items])
        if "load_s" in items[0]:  # decoding, perturbing and collating: the stream's data cost (tta/utils/timing.py)
            out["load_s"] = float(sum(it["load_s"] for it in items) + time.perf_counter() - start)
        return out
