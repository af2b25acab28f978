"""A small online-adaptation harness on the tiny embedded benchmark, for adapter unit and contract tests.

It does what :func:`tta.run.run` does up to the test loop (source model, clean gallery encoded once, query
batches, the adapter bound as the runner binds it), but keeps the model and a few collated batches in memory so that
many adapters can be run quickly on the same inputs.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path

import torch
from omegaconf import DictConfig

from tests.conftest import tiny_overrides
from tta.adapters import OnlineAdapter, build_adapter
from tta.data.cache import FrameCache
from tta.data.gallery import encode_gallery
from tta.data.registry import load_pairs
from tta.data.stream import Collate, ShiftSpec, TextItems, VideoItems
from tta.models.checkpoint import copy_model
from tta.models.retrieval import RetrievalModel
from tta.stages import data_settings
from tta.synth.zoo import load_model
from tta.utils.config import compose
from tta.utils.paths import cache_root


@dataclass
class Env:
    """The source model, its clean gallery and a few query batches of one (backbone, task)."""

    cfg: DictConfig
    model: RetrievalModel
    gallery: torch.Tensor
    gt: torch.Tensor
    batches: list[dict]
    pairs: list
    frames: FrameCache
    cache: Path


def build_env(cache: Path, model: str, task: str, batch_sizes: tuple[int, ...] = (6, 3), shift: str = "clean") -> Env:
    """Model, gallery (all tiny test pairs) and query batches of the given sizes (stream order)."""
    cfg = compose("run", tiny_overrides(cache, f"model={model}", f"task={task}", f"shift={shift}"))
    root = cache_root(cfg.paths.cache_dir)
    net = load_model(cfg.model, cfg.model.checkpoint, cfg.data, root, recipe=list(cfg.embedded_recipe))
    pairs = load_pairs(cfg.data, "test", root)
    frames = FrameCache(root / "frames", cfg.data.num_frames)
    spec = ShiftSpec(cfg.shift.name, int(cfg.shift.severity), int(cfg.seed))
    gallery = encode_gallery(net, pairs, task, data_settings(cfg).gallery, spec, frames, root)
    if task == "v2t":
        items = VideoItems(pairs, frames, net.image_size, spec if spec.kind == "video" else ShiftSpec())
    else:
        items = TextItems(pairs, spec if spec.kind == "text" else ShiftSpec())
    collate = Collate(net.tokenizer if task == "t2v" else None)
    batches, start = [], 0
    for size in batch_sizes:
        batches.append(collate([items[i] for i in range(start, start + size)]))
        start += size
    return Env(cfg, net, gallery, torch.arange(len(pairs)), batches, pairs, frames, root)


@functools.lru_cache(maxsize=256)
def _composed(cache: str, model: str, task: str, adapter: str, overrides: tuple[str, ...]) -> DictConfig:
    return compose("run", tiny_overrides(Path(cache), f"model={model}", f"task={task}", f"adapter={adapter}",
                                         *overrides))


def make_adapter(env: Env, adapter: str, *overrides: str, model: RetrievalModel | None = None) -> OnlineAdapter:
    """``conf/adapter/<adapter>.yaml`` (with overrides) built by :func:`tta.adapters.build_adapter`, as the
    runner builds it, and bound to a copy of the env's model."""
    cfg = _composed(str(env.cache), env.cfg.model.name, env.cfg.task, adapter, tuple(overrides))
    model = model if model is not None else copy_model(env.model)

    def source_split(n: int):
        from tta.data.source_split import SourceSplit

        return SourceSplit(model, load_pairs(cfg.data, "train", env.cache), n, env.cfg.task, env.frames)

    return build_adapter(cfg, model, env.gallery, env.gt, source_split=source_split)



