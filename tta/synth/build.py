"""Build the embedded benchmark on disk: real H.264 MP4 files plus annotations in the MSR-VTT format.

Layout of a built dataset (``<cache>/<name>-<config hash>/``), read by the same reader as real MSR-VTT
(:func:`tta.data.readers.msrvtt.read_msrvtt_split`)::

    videos/video<i>.mp4            H.264 (libx264, yuv420p), style-dependent size and fps
    MSRVTT_data.json               {"videos": [...split...], "sentences": [...]}  (all splits)
    MSRVTT_train.9k.csv            train video ids
    MSRVTT_JSFUSION_test.csv       test pairs, one caption per video (the 1k-A layout)
    MSRVTT_val.csv                 validation pairs, same layout
    <name>_main_objects.json       per-frame main-object boxes (schema: docs/shifts/mlvp.md)
    scenes.jsonl                   the generating scene of every video (ground truth for analysis)
    events.json                    multi-event datasets only (data=synth_comp): the ordered events of each caption
    manifest.json                  config, counts, versions; written last = the dataset is complete

Every video is a pure function of (seed, dataset name, video index), so an interrupted build resumes where it
stopped (each MP4 is written to a temporary name and renamed) and a single video can be regenerated alone.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from tta.comp.disrupt import EVENTS_FILE
from tta.synth.render import STYLE_GEOMETRY, render
from tta.synth.scene import Scene, caption, object_label, pretrain_caption, sample_scene
from tta.utils.bounds import SEED, Int, Options, bound
from tta.utils.forking import fork_pool
from tta.utils.io import atomic_write_json, atomic_write_text, file_lock
from tta.utils.progress import progress_iter
from tta.utils.seeding import derive_seed

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"


@dataclass(frozen=True)
class SynthConfig(Options):
    """What defines one embedded dataset; any change gives a new cache directory."""

    name: str = "synth"
    style: str = "a"
    seed: int = bound(SEED, 42)
    n_train: int = bound(Int(1), 2400)
    n_val: int = bound(Int(0), 200)
    n_test: int = bound(Int(1), 1000)
    captions_per_train_video: int = bound(Int(1), 3)
    crf: int = 18
    version: int = 2  # bump when the renderer or grammar changes
    # options added after datasets were built: at these values they stay out of the dataset's key and out of the
    # recipe keys of the checkpoints trained on it (tta/synth/zoo.py), so existing caches keep their names
    KEY_DEFAULT_OFF: ClassVar[dict[str, Any]] = {}

    def key(self) -> str:
        fields = {k: v for k, v in asdict(self).items()
                  if k not in self.KEY_DEFAULT_OFF or v != self.KEY_DEFAULT_OFF[k]}
        blob = json.dumps(fields, sort_keys=True).encode()
        return f"{self.name}-{hashlib.sha256(blob).hexdigest()[:10]}"

    def build(self, cache_dir: str | os.PathLike, workers: int = 2) -> Path:
        """The dataset's root, rendered on first use (the data config's ``synth`` node names this class)."""
        return build_synth(self, cache_dir, workers)

    def make_video(self, i: int, root: Path) -> dict:
        """Render and encode video ``i`` (kept if already on disk); return its annotation record."""
        vid = f"video{i}"
        scene = sample_scene(derive_rng(self.seed, self.name, i, "scene"), style=self.style)
        cap_rng = derive_rng(self.seed, self.name, i, "caption")
        n_caps = self.captions_per_train_video if split_of(self, i) == "train" else 1
        captions = [caption(scene, cap_rng) for _ in range(n_caps)]
        path = root / "videos" / f"{vid}.mp4"
        frames, boxes = render(scene)
        if not path.exists():
            write_mp4(path, frames, STYLE_GEOMETRY[self.style]["fps"], self.crf)
        return {"video_id": vid, "split": split_of(self, i), "captions": captions, "scene": scene.to_dict(),
                "boxes": boxes, "label": object_label(scene.objects[0]), "num_frames": int(frames.shape[0])}


def derive_rng(*parts) -> np.random.Generator:
    """A NumPy generator seeded by :func:`tta.utils.seeding.derive_seed` of ``parts``."""
    return np.random.default_rng(derive_seed(*parts))


def write_mp4(path: Path, frames: np.ndarray, fps: int, crf: int = 18) -> None:
    """Encode uint8 (T, H, W, 3) RGB frames to an H.264 MP4 atomically (temp file + rename)."""
    import av

    tmp = path.with_name(f"{path.name}.{os.getpid()}.part")  # per process: never two writers on one temp file
    with av.open(str(tmp), mode="w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"crf": str(crf), "preset": "veryfast", "threads": "1"}
        for frame in frames:
            for packet in stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    os.replace(tmp, path)


def split_of(cfg: SynthConfig, i: int) -> str:
    if i < cfg.n_train:
        return "train"
    return "val" if i < cfg.n_train + cfg.n_val else "test"


def _make_video(args: tuple[SynthConfig, int, str]) -> dict:
    """Worker: render + encode one video (skipped if already on disk); return its annotation record."""
    import cv2

    cv2.setNumThreads(1)
    cfg, i, root = args
    return cfg.make_video(i, Path(root))


def build_synth(cfg: SynthConfig, cache_dir: str | os.PathLike, workers: int = 2) -> Path:
    """Build (or reuse) the dataset described by ``cfg`` under ``cache_dir``; return its directory.

    Concurrent callers (jobs of one sweep) serialise on a lock file next to it: one builds, the others reuse."""
    root = Path(cache_dir) / cfg.key()
    if (root / MANIFEST).exists():
        return root
    with file_lock(root.with_name(root.name + ".lock"), f"the embedded dataset {cfg.name}"):
        if (root / MANIFEST).exists():  # another job built it while this one waited
            return root
        return _build_synth(cfg, root, workers)


def _build_synth(cfg: SynthConfig, root: Path, workers: int) -> Path:
    from tta.data.readers.msrvtt import (
        VideoTextPair,
        write_jsfusion_test_csv,
        write_msrvtt_data_json,
        write_msrvtt_train_csv,
    )

    log.info("building embedded dataset %s in %s (first use; resumable)", cfg.name, root)
    (root / "videos").mkdir(parents=True, exist_ok=True)
    total = cfg.n_train + cfg.n_val + cfg.n_test
    jobs = [(cfg, i, str(root)) for i in range(total)]
    if workers > 1:
        with fork_pool(workers) as pool:
            records = list(progress_iter(pool.imap(_make_video, jobs, chunksize=8), total, f"rendering {cfg.name}"))
    else:
        records = list(progress_iter(map(_make_video, jobs), total, f"rendering {cfg.name}"))

    videos, sentences, main_objects = [], [], {}
    sen_id = 0
    for r in records:
        videos.append({"category": r["scene"]["background"], "url": "", "video_id": r["video_id"], "start time": 0.0,
                       "end time": r["num_frames"] / STYLE_GEOMETRY[cfg.style]["fps"], "split": r["split"],
                       "id": int(r["video_id"][5:])})
        for c in r["captions"]:
            sentences.append({"caption": c, "video_id": r["video_id"], "sen_id": sen_id})
            sen_id += 1
        frames = {
            str(t): ([{"frame_index": t, "label": r["label"], "box": box, "rank_score": 1.0}] if box else [])
            for t, box in enumerate(r["boxes"])
        }
        main_objects[r["video_id"]] = {"video_path": f"videos/{r['video_id']}.mp4", "video_caption": r["captions"][0],
                                       "ranked_objects_per_frame": frames}
    write_msrvtt_data_json(root / "MSRVTT_data.json", videos, sentences)
    write_msrvtt_train_csv(root / "MSRVTT_train.9k.csv", [r["video_id"] for r in records if r["split"] == "train"])
    for split, fname in (("test", "MSRVTT_JSFUSION_test.csv"), ("val", "MSRVTT_val.csv")):
        pairs = [VideoTextPair(video_id=r["video_id"], caption=r["captions"][0], caption_id=f"ret{k}", video_path=None)
                 for k, r in enumerate(x for x in records if x["split"] == split)]
        write_jsfusion_test_csv(root / fname, pairs)
    atomic_write_json(root / f"{cfg.name}_main_objects.json", main_objects)
    if any("events" in r for r in records):  # multi-event datasets (synth_comp): the events behind each caption
        atomic_write_json(root / EVENTS_FILE, {r["video_id"]: r["events"] for r in records})
    atomic_write_text(root / "scenes.jsonl", "".join(json.dumps({"video_id": r["video_id"], **r["scene"]}) + "\n"
                                                     for r in records))
    atomic_write_json(root / MANIFEST, {"config": asdict(cfg), "counts": {s: sum(r["split"] == s for r in records)
                                                                          for s in ("train", "val", "test")}})
    return root


@dataclass(frozen=True)
class PretrainConfig(Options):
    """The broad image-text corpus of the embedded 'pretrained CLIP' (zero-shot scenario)."""

    name: str = "pretrain"
    seed: int = bound(SEED, 42)
    n_images: int = bound(Int(1), 8000)
    size: int = bound(Int(8), 96)
    version: int = 1

    def key(self) -> str:
        blob = json.dumps(asdict(self), sort_keys=True).encode()
        return f"{self.name}-{hashlib.sha256(blob).hexdigest()[:10]}"

    def build(self, cache_dir: str | os.PathLike, workers: int = 2) -> Path:
        """The corpus root, built on first use (``pretrain_corpus`` of conf/train.yaml names this class)."""
        return build_pretrain_corpus(self, cache_dir, workers)


def _pretrain_item(args: tuple[PretrainConfig, int]) -> tuple[np.ndarray, str]:
    import cv2

    cv2.setNumThreads(1)
    cfg, i = args
    rng = derive_rng(cfg.seed, cfg.name, i)
    style = "a" if rng.random() < 0.5 else "b"
    scene: Scene = sample_scene(rng, style=style)
    from tta.synth.render import main_visible

    t_len = STYLE_GEOMETRY[style]["frames"]
    visible = [t for t in range(t_len) if main_visible(scene, t / (t_len - 1))] or list(range(t_len))
    frame = render(scene, only=[visible[int(rng.integers(len(visible)))]])[0][0]
    h, w = frame.shape[:2]
    s = cfg.size / min(h, w)
    frame = cv2.resize(frame, (round(w * s), round(h * s)), interpolation=cv2.INTER_AREA)
    top, left = (frame.shape[0] - cfg.size) // 2, (frame.shape[1] - cfg.size) // 2
    return frame[top:top + cfg.size, left:left + cfg.size], pretrain_caption(scene, rng)


def build_pretrain_corpus(cfg: PretrainConfig, cache_dir: str | os.PathLike, workers: int = 2) -> Path:
    """Images (uint8 (N, size, size, 3) in ``images.npy``) and ``captions.json``; reused when complete."""
    root = Path(cache_dir) / cfg.key()
    if (root / MANIFEST).exists():
        return root
    with file_lock(root.with_name(root.name + ".lock"), "the embedded pretraining corpus"):
        if (root / MANIFEST).exists():
            return root
        return _build_pretrain_corpus(cfg, root, workers)


def _build_pretrain_corpus(cfg: PretrainConfig, root: Path, workers: int) -> Path:
    if root.exists():  # an interrupted build (the lock is held: no one else is writing it)
        shutil.rmtree(root)
    root.mkdir(parents=True)
    jobs = [(cfg, i) for i in range(cfg.n_images)]
    if workers > 1:
        with fork_pool(workers) as pool:
            items = list(progress_iter(pool.imap(_pretrain_item, jobs, chunksize=32), len(jobs), "pretraining corpus"))
    else:
        items = list(progress_iter(map(_pretrain_item, jobs), len(jobs), "pretraining corpus"))
    np.save(root / "images.npy", np.stack([im for im, _ in items]))
    atomic_write_json(root / "captions.json", [c for _, c in items])
    atomic_write_json(root / MANIFEST, {"config": asdict(cfg), "count": len(items)})
    return root
