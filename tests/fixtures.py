"""In-memory inputs for the fast test tier (docs/testing.md): a tiny random retrieval model, synthetic clips and
captions, a gallery and collated query batches - no rendering, no training, no files, well under a second.

The model is the real :class:`tta.models.retrieval.RetrievalModel` (CLIP4Clip-meanP or X-Pool head) over a tiny
open_clip CLIP (``arch=custom``: the same open_clip ViT as the embedded vision tower, with a 1-layer text
transformer instead of the embedded model's pretrained all-MiniLM-L6-v2, whose load alone takes seconds),
randomly initialised with a fixed seed. The batches are built with the runner's own :class:`tta.data.stream.Collate`
(``{"index", "video"}`` for v2t, ``{"index", "text", "tokens"}`` for t2v, plus ``"segment"`` when asked), so they
are what an adapter's ``test_step`` receives.

Adapter construction lives in :func:`make_fast_adapter` only (the one place to switch to
``tta.adapters.build_adapter`` when that API lands).
"""

from __future__ import annotations

import copy
import functools
from dataclasses import dataclass

import numpy as np
import torch
from omegaconf import DictConfig

from tta.models.checkpoint import copy_model
from tta.models.retrieval import RetrievalModel
from tta.models.towers import CUSTOM, TowerConfig

TINY_SIZE = 32  # image size of the tiny vision tower (2 x 2 patches of 16 px)
TINY_FRAMES = 4
TINY_CLIP_CFG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": TINY_SIZE, "layers": 2, "width": 32, "patch_size": 16, "head_width": 16},
    "text_cfg": {"context_length": 16, "vocab_size": 49408, "width": 32, "heads": 2, "layers": 1},
}

COLOURS = {"red": (220, 40, 40), "green": (40, 200, 60), "blue": (40, 60, 220), "yellow": (230, 210, 40)}
SHAPES = ("square", "circle")
MOTIONS = {"right": (1, 0), "left": (-1, 0), "down": (0, 1), "up": (0, -1)}


# ------------------------------------------------------------------------------------------------------ model
def tiny_tower_config() -> TowerConfig:
    return TowerConfig(arch=CUSTOM, clip_cfg=copy.deepcopy(TINY_CLIP_CFG),
                       context_length=TINY_CLIP_CFG["text_cfg"]["context_length"])


@functools.lru_cache(maxsize=4)
def _tiny_model(head: str, seed: int) -> RetrievalModel:
    torch.manual_seed(seed)
    model = RetrievalModel(tiny_tower_config(), head=head).eval()
    # open_clip initialises LayerNorms to (1, 0): jitter them so that a wrong restore cannot pass by accident
    gen = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for mod in model.modules():
            if isinstance(mod, torch.nn.LayerNorm) and mod.elementwise_affine:
                mod.weight.add_(0.05 * torch.randn(mod.weight.shape, generator=gen))
                mod.bias.add_(0.05 * torch.randn(mod.bias.shape, generator=gen))
    return model


def tiny_model(head: str = "meanp", seed: int = 0) -> RetrievalModel:
    """A fresh tiny random RetrievalModel (``meanp`` = CLIP4Clip, ``seqtransf`` = CLIP4Clip-seqTransf, ``xpool`` =
    X-Pool), identical for a given seed."""
    return copy_model(_tiny_model(head, seed))


# ------------------------------------------------------------------------------------------------ synthetic data
def moving_shape_clip(t: int = 8, h: int = 48, w: int = 64, colour: str = "red", shape: str = "square",
                      motion: str = "right", seed: int = 0) -> np.ndarray:
    """uint8 (T, H, W, 3): a coloured shape moving over a smooth noisy background."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    base = (60 + 40 * np.sin(xx / 7.0 + seed)[..., None] + 30 * np.cos(yy / 5.0)[..., None]
            + rng.normal(0, 6, (h, w, 3)))
    frames = np.empty((t, h, w, 3), dtype=np.uint8)
    r = max(3, min(h, w) // 6)
    dx, dy = MOTIONS[motion]
    cx0, cy0 = w // 2 - dx * t, h // 2 - dy * t
    for i in range(t):
        img = base.copy()
        cx, cy = cx0 + 2 * dx * i, cy0 + 2 * dy * i
        mask = (np.abs(xx - cx) <= r) & (np.abs(yy - cy) <= r) if shape == "square" else \
            (xx - cx) ** 2 + (yy - cy) ** 2 <= r * r
        img[mask] = COLOURS[colour]
        frames[i] = np.clip(img, 0, 255).astype(np.uint8)
    return frames


def synthetic_pairs(n: int = 8, t: int = 8, h: int = 48, w: int = 64) -> list[tuple[np.ndarray, str]]:
    """``n`` distinct (clip, caption) pairs: every (colour, shape, motion) once, in a fixed order."""
    combos = [(c, s, m) for m in MOTIONS for s in SHAPES for c in COLOURS]
    out = []
    for i in range(n):
        colour, shape, motion = combos[i % len(combos)]
        clip = moving_shape_clip(t, h, w, colour, shape, motion, seed=i)
        out.append((clip, f"a {colour} {shape} moves {motion}"))
    return out


# ------------------------------------------------------------------------------------------------- environment
@dataclass
class FastEnv:
    """The source model, its clean gallery and a few collated query batches of one (head, task)."""

    head: str
    task: str
    model: RetrievalModel
    gallery: torch.Tensor  # (G, D) captions for v2t, (G, T, D) frame features for t2v
    gt: torch.Tensor
    batches: list[dict]
    clips: list[torch.Tensor]  # normalised (T, 3, S, S)
    captions: list[str]


def build_fast_env(head: str = "meanp", task: str = "v2t", batch_sizes: tuple[int, ...] = (4, 2), n: int = 8,
                   segments: tuple[int, ...] | None = None, seed: int = 0) -> FastEnv:
    """Tiny model + gallery of ``n`` items + query batches of the given sizes in stream order (items 0, 1, ...).

    ``segments`` gives each batch a ``"segment"`` entry (stream scenarios); absent by default, as in a plain run.
    """
    from tta.data.stream import Collate
    from tta.media.transforms import clip_transform
    from tta.models.encode import encode_texts, encode_videos

    if sum(batch_sizes) > n:
        raise ValueError(f"batches of {batch_sizes} need at least {sum(batch_sizes)} items, got n={n}")
    model = tiny_model(head, seed)
    pairs = synthetic_pairs(n, t=TINY_FRAMES)
    clips = [clip_transform(torch.from_numpy(c), model.image_size) for c, _ in pairs]
    captions = [c for _, c in pairs]
    if task == "v2t":
        gallery = encode_texts(model, captions)
        items = [{"index": i, "video": clips[i]} for i in range(n)]
    elif task == "t2v":
        gallery = encode_videos(model, lambda i: clips[i], n)
        items = [{"index": i, "text": captions[i]} for i in range(n)]
    else:
        raise ValueError(f"task must be v2t or t2v, got {task!r}")
    collate = Collate(model.tokenizer if task == "t2v" else None)
    batches, start = [], 0
    for k, size in enumerate(batch_sizes):
        batch = collate(items[start:start + size])
        if segments is not None:
            batch["segment"] = int(segments[k])
        batches.append(batch)
        start += size
    return FastEnv(head, task, model, gallery, torch.arange(n), batches, clips, captions)


# ----------------------------------------------------------------------------------------------------- adapters
@functools.lru_cache(maxsize=64)
def _composed(overrides: tuple[str, ...]) -> DictConfig:
    from tta.utils.config import compose

    return compose("run", list(overrides))


def adapter_config(adapter: str, task: str, head: str, overrides: tuple[str, ...] = ()) -> DictConfig:
    """``conf/run.yaml`` with ``adapter=<adapter>``, the task and the model of ``head``, and overrides.

    Hydra composes each adapter once (about 0.3 s a compose); the task and model groups are swapped in after.
    """
    from omegaconf import OmegaConf

    cfg = copy.deepcopy(_composed((f"adapter={adapter}", *overrides)))
    model = _composed({"xpool": ("model=xpool",), "seqtransf": ("model=clip4clip_seqtransf",)}.get(head, ()))
    OmegaConf.update(cfg, "model", copy.deepcopy(model.model), merge=False)
    OmegaConf.update(cfg, "task", task, merge=False)
    return cfg


def make_fast_adapter(env: FastEnv, adapter: str, *overrides: str, model: RetrievalModel | None = None):
    """``conf/adapter/<adapter>.yaml`` built by the runner's own :func:`tta.adapters.build_adapter`, bound to a
    copy of ``env.model`` (or ``model``). The fast tier has no training split: adapters that ask for clean source
    pairs belong to the full tier (tests/adapters/adapter_env.py)."""
    from tta.adapters import build_adapter

    cfg = adapter_config(adapter, env.task, env.head, tuple(overrides))
    assert cfg.task == env.task
    return build_adapter(cfg, model if model is not None else copy_model(env.model), env.gallery, env.gt)


def stream(adapter, batches: list[dict], accelerator: str = "cpu") -> torch.Tensor:
    """Run the batches through ``Trainer(inference_mode=False).test`` as the runner does; return the new rows."""
    import lightning as L
    from torch.utils.data import DataLoader

    before = len(adapter.rows)
    trainer = L.Trainer(accelerator=accelerator, devices=1, inference_mode=False, logger=False,
                        enable_checkpointing=False,
                        enable_model_summary=False, enable_progress_bar=False)
    trainer.test(adapter, dataloaders=DataLoader(batches, batch_size=None), verbose=False)
    return torch.cat(adapter.rows[before:])


# ------------------------------------------------------------------------------------------------ real captions
MSRVTT_CSV_NAME = "MSRVTT_JSFUSION_test.csv"


def find_msrvtt_csv():
    """``shared/data/MSRVTT_JSFUSION_test.csv`` beside the repository or beside any ancestor folder (a git worktree
    such as /work/wt/<name> finds /work/shared), or ``$TTA_MSRVTT_CSV``; None when absent."""
    import os
    from pathlib import Path

    env = os.environ.get("TTA_MSRVTT_CSV")
    if env:
        return Path(env) if Path(env).is_file() else None
    repo = Path(__file__).resolve().parents[1]
    for folder in repo.parents:
        path = folder / "shared" / "data" / MSRVTT_CSV_NAME
        if path.is_file():
            return path
    return None


@functools.lru_cache(maxsize=1)
def _caption_rows(path: str) -> tuple[tuple[str, str], ...]:
    import csv

    with open(path, newline="") as f:
        return tuple((r["key"], r["sentence"]) for r in csv.DictReader(f))


def real_captions(n: int = 4) -> list[tuple[str, str]]:
    """The first ``n`` (caption id, caption) of the MSR-VTT 1k-A test list; skips the test when the file is absent."""
    import pytest

    path = find_msrvtt_csv()
    if path is None:
        pytest.skip(f"real MSR-VTT captions ({MSRVTT_CSV_NAME}) not found in shared/data beside the repository or an "
                    "ancestor folder; set TTA_MSRVTT_CSV")
    return list(_caption_rows(str(path))[:n])


def state_copy(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def bit_equal(a, b) -> bool:
    """Recursive bit-exact equality of (nested) optimizer state dicts."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(bit_equal(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(bit_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def assert_contract_after_stream(name: str, adapter, before: dict, allowed: set, gradient_free: bool, optim0,
                                 first: torch.Tensor, batches: list[dict]) -> None:
    """The adapter contract once a stream ran: only ``allowed`` (query LayerNorm) tensors moved (none for a
    gradient-free method), the weights stay finite, and ``reset()`` restores weights, optimizer state and the
    first batch's scores bit for bit."""
    after = state_copy(adapter.model)
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved <= allowed, f"{name} changed {sorted(moved - allowed)[:5]}"
    if gradient_free:
        assert not moved, f"{name} is gradient-free but changed {sorted(moved)[:5]}"
    assert all(torch.isfinite(v).all() for v in after.values() if v.is_floating_point()), f"{name}: non-finite weights"
    adapter.reset()
    restored = state_copy(adapter.model)
    assert all(torch.equal(before[k], restored[k]) for k in before), f"{name}: reset() did not restore the weights"
    if optim0 is not None:
        assert bit_equal(optim0, adapter.optimizer.state_dict()), f"{name}: optimizer state not restored"
    again = stream(adapter, batches[:1])
    assert torch.equal(first[: len(again)], again), f"{name}: scores after reset() differ from the first pass"
