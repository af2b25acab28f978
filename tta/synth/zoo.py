"""Embedded checkpoints, built on first use and cached: the pretrained "CLIP" and the fine-tuned backbones.

The recipe is ``conf/train.yaml`` composed with the run's own ``model`` and ``data`` nodes, so a checkpoint is
keyed by everything that shapes it (architecture, dataset config, training hyper-parameters). Building prints
progress; a finished checkpoint is reused by every later run, in any process.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from tta.models.checkpoint import load_checkpoint
from tta.models.factory import model_from_config
from tta.models.heads import MeanPHead, head_name
from tta.models.retrieval import RetrievalModel
from tta.models.towers import EMBEDDED
from tta.utils.config import compose
from tta.utils.io import CorruptFileError, file_lock
from tta.utils.paths import cache_root

log = logging.getLogger(__name__)

_VOLATILE = ("output", "progress_bar", "accelerator", "workers", "paths", "init", "eval_split", "eval_subset")


# dataset keys that do not change what a checkpoint learns (evaluation-time choices, scenario wiring)
_DATA_VOLATILE = ("cross_source", "root_env", "split")

# fine-tuning options whose default trains exactly what the recipe without them trains: left out of the key at that
# default (likewise comp_loss.chain at the default chain and comp_loss.reversed_video off), so a checkpoint keyed
# before the option existed is still found; a recipe's pretraining stage runs with them at their defaults, so it
# starts from the shared pretrained model
_DEFAULT_OFF = {"text_trunk_trainable_layers": 0, "text_trunk_lr": None}
_DEFAULT_CHAIN = ["temp_reorder", "action_replace", "reorder_replaced"]


def _recipe_key(cfg: DictConfig) -> str:
    plain = OmegaConf.to_container(cfg, resolve=True)
    for k in _VOLATILE:
        plain.pop(k, None)
    if plain.get("stage") == "pretrain" or not (plain.get("comp_loss") or {}).get("weight"):
        plain.pop("comp_loss", None)  # no CompLoss term in this stage: the key of the InfoNCE-only recipe
    else:
        if list(plain["comp_loss"].get("chain", _DEFAULT_CHAIN)) == _DEFAULT_CHAIN:
            plain["comp_loss"].pop("chain", None)
        if not plain["comp_loss"].get("reversed_video", True):
            plain["comp_loss"].pop("reversed_video")
    for k, default in _DEFAULT_OFF.items():
        if k in plain and plain[k] == default:
            plain.pop(k)
    for k in _DATA_VOLATILE:
        (plain.get("data") or {}).pop(k, None)
    reader = (plain.get("data") or {}).get("reader")
    if isinstance(reader, dict):  # a reader enters by its format (the module of its _target_); its options are data keys
        plain["data"]["reader"] = reader["_target_"].rsplit(".", 2)[-2]
    if isinstance((plain.get("model") or {}).get("head"), dict):  # a head enters by the name checkpoints store
        plain["model"]["head"] = head_name(OmegaConf.create(plain["model"]))
    for node in (plain.get("pretrain_corpus"), (plain.get("data") or {}).get("synth")):
        if isinstance(node, dict):  # which class builds the data is not part of what it holds
            node.pop("_target_", None)
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:10]


def _flat(node: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in node.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


def _train_cfg(stage: str, model_cfg: DictConfig, data_cfg: DictConfig | None, cache: Path,
               recipe: list[str] | None = None) -> DictConfig:
    model_node = OmegaConf.to_container(model_cfg, resolve=True)
    # a model's own fine-tuning options (model.finetune_overrides, e.g. seqTransf trains on every frame) come before
    # the recipe's, so an explicit recipe option still wins; they enter the key as the options they set
    own = model_node.pop("finetune_overrides", None) or {}
    own = [f"{k}={v}" for k, v in _flat(own).items()] if stage == "finetune" else []
    cfg = compose("train", [f"stage={stage}", *own, *(recipe or [])])
    OmegaConf.set_struct(cfg, False)
    if stage == "pretrain":
        for k, default in _DEFAULT_OFF.items():
            cfg[k] = default
        model_node["head"] = {"_target_": f"{MeanPHead.__module__}.{MeanPHead.__name__}"}
        model_node["name"] = "clip"
    cfg.model = model_node
    if data_cfg is not None:
        cfg.data = OmegaConf.to_container(data_cfg, resolve=True)
        cfg.data.subset = None
    cfg.paths.cache_dir = str(cache)
    stage_over = cfg.get(f"{stage}_overrides") or {}
    for k, v in stage_over.items():
        cfg[k] = v
    return cfg


def ensure_embedded_checkpoint(model_cfg: DictConfig, data_cfg: DictConfig | None, cache: Path | None = None,
                               pretrained_only: bool = False, recipe: list[str] | None = None) -> Path:
    """Path of the embedded checkpoint for (model, data), training it (and the pretrained model) if missing.

    Args:
        recipe: extra Hydra overrides of ``conf/train.yaml`` (e.g. ``["steps=5"]`` for tests); they enter the key.
    """
    from tta.train import train

    cache = cache_root(cache)
    pre_cfg = _train_cfg("pretrain", model_cfg, None, cache, recipe)
    pre_path = cache / "checkpoints" / f"pretrained-{_recipe_key(pre_cfg)}.pt"
    if not pre_path.exists():
        with file_lock(pre_path.with_suffix(".lock"), "the embedded pretrained model"):
            if not pre_path.exists():  # not built by another job while this one waited
                log.info("building the embedded pretrained model (first use, a few minutes): %s", pre_path)
                pre_cfg.output = str(pre_path)
                train(pre_cfg)
    if pretrained_only:
        return pre_path
    if data_cfg is None:
        raise ValueError("a fine-tuned checkpoint needs a dataset config")
    ft_cfg = _train_cfg("finetune", model_cfg, data_cfg, cache, recipe)
    ft_cfg.init = str(pre_path)
    key = _recipe_key(ft_cfg) + hashlib.sha256(str(pre_path.name).encode()).hexdigest()[:4]
    path = cache / "checkpoints" / f"{model_cfg.name}-{data_cfg.name}-{key}.pt"
    if not path.exists():
        with file_lock(path.with_suffix(".lock"), f"the embedded {model_cfg.name} checkpoint"):
            if not path.exists():
                log.info("fine-tuning the embedded %s on %s (first use, a few minutes): %s", model_cfg.name,
                         data_cfg.name, path)
                ft_cfg.output = str(path)
                train(ft_cfg)
    return path


def load_model(model_cfg: DictConfig, checkpoint: str | None = "auto", data_cfg: DictConfig | None = None,
               cache: Path | None = None, recipe: list[str] | None = None) -> RetrievalModel:
    """The model of a run: the embedded model's ``auto`` (fine-tuned on ``data_cfg``) and ``pretrained``
    checkpoints are built here on first use; every other case is :func:`tta.models.factory.model_from_config`."""
    ckpt = str(checkpoint) if checkpoint is not None else "none"
    if ckpt in ("auto", "pretrained") and model_cfg.arch == EMBEDDED:
        path = ensure_embedded_checkpoint(model_cfg, data_cfg, cache, pretrained_only=ckpt == "pretrained",
                                          recipe=recipe)
        try:
            return load_checkpoint(path, head=head_name(model_cfg))
        except CorruptFileError as e:  # a cache entry: rebuilt, not reported (a damaged pretrained one goes too)
            log.warning("%s; rebuilding the embedded checkpoint", e)
            with file_lock(path.with_suffix(".lock"), "the embedded checkpoint"):
                path.unlink(missing_ok=True)
            path = ensure_embedded_checkpoint(model_cfg, data_cfg, cache, pretrained_only=ckpt == "pretrained",
                                              recipe=recipe)
            return load_checkpoint(path, head=head_name(model_cfg))
    return model_from_config(model_cfg, ckpt)
