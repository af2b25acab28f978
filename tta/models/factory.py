"""Build the retrieval model a run asks for: ``model.checkpoint`` = ``auto`` | ``pretrained`` | a path | ``none``.

* ``auto``: the source model fine-tuned on the clean train split of ``data`` (embedded: built on first use by
  :mod:`tta.models.zoo`; real datasets: give a path);
* ``pretrained``: the towers only, no retrieval fine-tuning (zero-shot scenario);
* a path: a ``tta`` checkpoint (:mod:`tta.models.checkpoint`);
* ``none``: towers from ``model.arch`` / ``model.pretrained`` (an open_clip tag, a local file, or random).
"""

from __future__ import annotations

import os
from pathlib import Path

from omegaconf import DictConfig

from tta.models.checkpoint import load_checkpoint
from tta.models.retrieval import RetrievalModel
from tta.models.towers import EMBEDDED, TowerConfig

TOWER_KEYS = ("arch", "pretrained", "embed_dim", "context_length", "vision", "text_proj", "quick_gelu", "clip_cfg")


def tower_config(model_cfg: DictConfig) -> TowerConfig:
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(model_cfg, resolve=True)
    return TowerConfig(**{k: plain[k] for k in TOWER_KEYS if k in plain})


def model_from_config(model_cfg: DictConfig, checkpoint: str | None = "auto", data_cfg: DictConfig | None = None,
                      cache: Path | None = None, recipe: list[str] | None = None) -> RetrievalModel:
    """The model of a run (see the module docstring for ``checkpoint``)."""
    ckpt = str(checkpoint) if checkpoint is not None else "none"
    if ckpt in ("auto", "pretrained"):
        if model_cfg.arch != EMBEDDED:
            if ckpt == "pretrained":
                return RetrievalModel(tower_config(model_cfg), head=model_cfg.head).eval()
            raise ValueError(f"model.checkpoint=auto builds checkpoints only for the embedded model; for "
                             f"arch={model_cfg.arch} give model.checkpoint=<path to a fine-tuned tta checkpoint> "
                             f"(convert official X-Pool/CLIP4Clip checkpoints first) or model.checkpoint=pretrained")
        from tta.models.zoo import ensure_embedded_checkpoint

        path = ensure_embedded_checkpoint(model_cfg, data_cfg, cache, pretrained_only=ckpt == "pretrained",
                                          recipe=recipe)
        return load_checkpoint(path, head=model_cfg.head)
    if ckpt.lower() in ("none", "null", ""):
        return RetrievalModel(tower_config(model_cfg), head=model_cfg.head).eval()
    if not os.path.exists(ckpt):
        raise FileNotFoundError(f"model.checkpoint={ckpt} does not exist; use auto, pretrained, none or a file path")
    return load_checkpoint(ckpt, head=model_cfg.head, expect_arch=model_cfg.arch)
