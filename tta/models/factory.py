"""Build the retrieval model a run asks for: ``model.checkpoint`` = ``auto`` | ``pretrained`` | a path | ``none``.

* ``auto``: the source model fine-tuned on the clean train split of ``data`` (embedded: built on first use by
  :func:`tta.synth.zoo.load_model`; real datasets: give a path);
* ``pretrained``: the towers only, no retrieval fine-tuning (zero-shot scenario);
* a path: a ``tta`` checkpoint (:mod:`tta.models.checkpoint`);
* ``none``: towers from ``model.arch`` / ``model.pretrained`` (an open_clip tag, a local file, or random).
"""

from __future__ import annotations

import dataclasses
import json
import os

from omegaconf import DictConfig

from tta.models.checkpoint import copy_model, load_checkpoint
from tta.models.heads import head_name
from tta.models.retrieval import RetrievalModel
from tta.models.towers import EMBEDDED, TowerConfig
from tta.utils.reuse import file_identity, reuse

TOWER_KEYS = ("arch", "pretrained", "embed_dim", "context_length", "vision", "text_proj", "quick_gelu", "clip_cfg")


def tower_config(model_cfg: DictConfig) -> TowerConfig:
    from omegaconf import OmegaConf

    plain = OmegaConf.to_container(model_cfg, resolve=True)
    return TowerConfig(**{k: plain[k] for k in TOWER_KEYS if k in plain})


def text_pool(model_cfg: DictConfig) -> str:
    """``model.text_pool`` (``mean`` when the config has no such key)."""
    return str(model_cfg.get("text_pool") or "mean")


def model_from_config(model_cfg: DictConfig, checkpoint: str | None = "none") -> RetrievalModel:
    """The model of ``model_cfg`` with ``checkpoint`` (see the module docstring); the embedded model's ``auto`` and
    ``pretrained`` checkpoints come from :func:`tta.synth.zoo.load_model`."""
    ckpt = str(checkpoint) if checkpoint is not None else "none"
    if ckpt in ("auto", "pretrained"):
        if model_cfg.arch == EMBEDDED:  # built on first use by the embedded benchmark, not here
            raise ValueError(f"model.checkpoint={ckpt} of the embedded model is built by tta.synth.zoo.load_model")
        if ckpt == "pretrained":
            return towers_model(model_cfg)
        raise ValueError(f"model.checkpoint=auto builds checkpoints only for the embedded model; for "
                         f"arch={model_cfg.arch} give model.checkpoint=<path to a fine-tuned tta checkpoint> "
                         f"(convert official X-Pool/CLIP4Clip checkpoints first) or model.checkpoint=pretrained")
    if ckpt.lower() in ("none", "null", ""):
        return towers_model(model_cfg)
    if not os.path.exists(ckpt):
        raise FileNotFoundError(f"model.checkpoint={ckpt} does not exist; use auto, pretrained, none or a file path")
    return load_checkpoint(ckpt, head=head_name(model_cfg), expect_arch=model_cfg.arch, text_pool=text_pool(model_cfg))


def towers_model(model_cfg: DictConfig) -> RetrievalModel:
    """The model of the towers alone (``model.pretrained``'s weights, or random ones), in eval mode; in a process
    that built the same towers at the same generator state before, a copy of that model (:mod:`tta.utils.reuse`;
    a copy costs a fraction of a large tower's initialisation)."""
    tower, head, pool = tower_config(model_cfg), head_name(model_cfg), text_pool(model_cfg)
    weights = tower.pretrained
    source = file_identity(weights) if weights and os.path.isfile(weights) else weights
    key = ("towers", json.dumps(dataclasses.asdict(tower), sort_keys=True, default=str), source, head, pool)
    return reuse("model", key, lambda: RetrievalModel(tower, head=head, text_pool=pool).eval(), copy_model,
                 draws_rng=True)
