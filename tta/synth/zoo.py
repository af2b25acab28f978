"""Embedded checkpoints, built on first use and cached: the pretrained "CLIP" and the fine-tuned backbones.

The recipe is ``conf/train.yaml`` composed with the run's own ``model`` and ``data`` nodes, so a checkpoint is
keyed by everything that shapes it (architecture, dataset config, training hyper-parameters). Building prints
progress; a finished checkpoint is reused by every later run, in any process.
"""

from __future__ import annotations

import copy
import functools
import hashlib
import json
import logging
from pathlib import Path

from hydra.utils import get_class
from omegaconf import DictConfig, OmegaConf

from tta.models.checkpoint import load_checkpoint
from tta.models.factory import model_from_config, text_pool
from tta.models.heads import MeanPHead, head_name
from tta.models.retrieval import RetrievalModel
from tta.models.towers import EMBEDDED
from tta.utils.config import compose_kept
from tta.utils.io import CorruptFileError, file_lock
from tta.utils.paths import cache_root
from tta.utils.progress import Stage

log = logging.getLogger(__name__)

_VOLATILE = ("output", "progress_bar", "accelerator", "workers", "paths", "init", "eval_split", "eval_subset")


# dataset keys that do not change what a checkpoint learns (evaluation-time choices, scenario wiring)
_DATA_VOLATILE = ("cross_source", "root_env", "split")

# fine-tuning options whose default trains exactly what the recipe without them trains: left out of the key at that
# default (likewise comp_loss.chain at the default chain and comp_loss.reversed_video off), so a checkpoint keyed
# before the option existed is still found; a recipe's pretraining stage runs with them at their defaults, so it
# starts from the shared pretrained model
_DEFAULT_OFF = {"text_trunk_trainable_layers": 0, "text_trunk_lr": None, "plateau": None}
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
    if isinstance(plain.get("model"), dict) and plain["model"].get("text_pool", "mean") == "mean":
        plain["model"].pop("text_pool", None)  # the default pooling: keys made before the option stay valid
    if isinstance(plain.get("model"), dict) and "checkpoint" in plain["model"]:
        # which checkpoint a run loads is not how it is trained: model.checkpoint=pretrained must find the pretrained
        # model that `auto` fine-tunes from, under the key every checkpoint was made with
        plain["model"]["checkpoint"] = "auto"
    for k in _DATA_VOLATILE:
        (plain.get("data") or {}).pop(k, None)
    reader = (plain.get("data") or {}).get("reader")
    if isinstance(reader, dict):  # a reader enters by its format (the module of its _target_); its options are data keys
        plain["data"]["reader"] = reader["_target_"].rsplit(".", 2)[-2]
    if isinstance((plain.get("model") or {}).get("head"), dict):  # a head enters by the name checkpoints store
        plain["model"]["head"] = head_name(OmegaConf.create(plain["model"]))
    for node in (plain.get("pretrain_corpus"), (plain.get("data") or {}).get("synth")):
        if isinstance(node, dict):  # which class builds the data is not part of what it holds
            target = node.pop("_target_", None)
            for k, default in getattr(get_class(target), "KEY_DEFAULT_OFF", {}).items() if target else ():
                if k in node and node[k] == default:
                    node.pop(k)
    return hashlib.sha256(json.dumps(plain, sort_keys=True).encode()).hexdigest()[:10]


def _flat(node: dict, prefix: str = "") -> dict:
    out = {}
    for k, v in node.items():
        out.update(_flat(v, f"{prefix}{k}.") if isinstance(v, dict) else {f"{prefix}{k}": v})
    return out


@functools.lru_cache(maxsize=16)
def _train_recipe(overrides: tuple[str, ...]) -> DictConfig:
    """``conf/train.yaml`` with ``overrides``, composed once per process (a run asks for it four times) and read
    from the cache by a warm one."""
    return compose_kept("train", list(overrides))


def _train_cfg(stage: str, model_cfg: DictConfig, data_cfg: DictConfig | None, cache: Path,
               recipe: list[str] | None = None) -> DictConfig:
    model_node = OmegaConf.to_container(model_cfg, resolve=True)
    # a model's own fine-tuning options (model.finetune_overrides, e.g. seqTransf trains on every frame) come before
    # the recipe's, so an explicit recipe option still wins; they enter the key as the options they set
    own = model_node.pop("finetune_overrides", None) or {}
    own = [f"{k}={v}" for k, v in _flat(own).items()] if stage == "finetune" else []
    cfg = copy.deepcopy(_train_recipe((f"stage={stage}", *own, *(recipe or []))))
    OmegaConf.set_struct(cfg, False)
    if stage == "pretrain":
        for k, default in _DEFAULT_OFF.items():
            cfg[k] = default
        model_node["head"] = {"_target_": f"{MeanPHead.__module__}.{MeanPHead.__name__}"}
        model_node["text_pool"] = "mean"  # one pretrained model for every text pooling (a new one starts fresh)
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
    """Path of the embedded checkpoint for (model, data): from the cache, rebuilt from the weights that ship with
    the repository (:mod:`tta.synth.shipped`), or trained (with the pretrained model it starts from) if missing.

    Args:
        recipe: extra Hydra overrides of ``conf/train.yaml`` (e.g. ``["steps=5"]`` for tests); they enter the key.
    """
    cache = cache_root(cache)
    pre_cfg = _train_cfg("pretrain", model_cfg, None, cache, recipe)
    pre_path = _pretrained_path(pre_cfg, cache)
    if not pretrained_only:
        if data_cfg is None:
            raise ValueError("a fine-tuned checkpoint needs a dataset config")
        ft_cfg = _train_cfg("finetune", model_cfg, data_cfg, cache, recipe)
        ft_cfg.init = str(pre_path)
        path = _finetuned_path(model_cfg, data_cfg, ft_cfg, pre_path, cache)
        if _cached_or_shipped(path):  # the pretrained model is needed only to train this one
            return path
    if not _cached_or_shipped(pre_path):
        _train_once(pre_cfg, pre_path, "the embedded pretrained model",
                    "building the embedded pretrained model (first use, a few minutes): %s", pre_path)
    if pretrained_only:
        return pre_path
    _train_once(ft_cfg, path, f"the embedded {model_cfg.name} checkpoint",
                "fine-tuning the embedded %s on %s (first use, a few minutes): %s", model_cfg.name, data_cfg.name, path)
    return path


def _cached_or_shipped(path: Path) -> bool:
    """Whether the checkpoint ``path`` is in the cache, after rebuilding it from shipped weights if there are any."""
    from tta.synth.shipped import materialise, shipped_file

    if path.exists():
        return True
    shipped = shipped_file(path.name)
    if shipped is None:
        return False
    with file_lock(path.with_suffix(".lock"), f"the embedded checkpoint {path.name}"):
        return path.exists() or materialise(shipped, path)


def _train_once(cfg: DictConfig, path: Path, what: str, message: str, *args) -> None:
    """Train ``cfg`` into ``path`` unless another job built it while this one waited for the lock."""
    from tta.train import train

    with file_lock(path.with_suffix(".lock"), what):
        if not path.exists():
            log.info(message, *args)
            cfg.output = str(path)
            train(cfg)


# Seconds per unit of work of each first-use stage on the reference machine (a quiet 2-core CPU, embedded CLIP4Clip on
# synth: 500 pretraining steps of 256 images, 500 fine-tuning steps of 128 clips x 4 frames, 3,600 videos;
# docs/results/first-run-time.md). They set the stages' shares of the set-up bar; its ETA rescales them by the speed
# measured so far.
_COST_S = {"corpus image": 4 / 6000, "pretrain step": 65 / 500, "rendered video": 25 / 3600,
           "decoded video": 11 / 2400, "caption": 10 / 6000, "finetune step": 124 / 500}


def _synth_root(data_cfg: DictConfig, cache: Path) -> tuple[Path, int, int, int] | None:
    """(root, videos, train videos, train captions) of a generated dataset, or None for a dataset on disk."""
    if not data_cfg.get("synth") or data_cfg.get("root"):
        return None
    from hydra.utils import instantiate

    builder = instantiate(data_cfg.synth, name=data_cfg.name)
    n = {s: int(getattr(builder, f"n_{s}", 0) or 0) for s in ("train", "val", "test")}
    per_video = int(getattr(builder, "captions_per_train_video", 1) or 1)
    return cache / "data" / builder.key(), sum(n.values()), n["train"], n["train"] * per_video


def setup_stages(model_cfg: DictConfig, checkpoint: str | None, data_cfg: DictConfig | None,
                 run_data: DictConfig | None = None, cache: Path | None = None,
                 recipe: list[str] | None = None) -> list[Stage]:
    """The first-use stages a run still has to do, in the order it does them; empty when everything is cached.

    The embedded ``model_cfg`` is built for ``checkpoint`` ``auto`` (pretrained, then fine-tuned on ``data_cfg``) or
    ``pretrained``, unless it is cached or ships with the repository; a generated ``run_data`` is rendered if missing.
    """
    cache = cache_root(cache)
    ckpt = str(checkpoint) if checkpoint is not None else "none"
    embedded = model_cfg.get("arch") == EMBEDDED and ckpt in ("auto", "pretrained")
    pre_cfg = _train_cfg("pretrain", model_cfg, None, cache, recipe)
    pre_path = _pretrained_path(pre_cfg, cache)
    finetune: list[Stage] = []
    rendered: set[Path] = set()
    if embedded and ckpt == "auto" and data_cfg is not None:
        ft_cfg = _train_cfg("finetune", model_cfg, data_cfg, cache, recipe)
        if not _available(_finetuned_path(model_cfg, data_cfg, ft_cfg, pre_path, cache)):
            finetune = _finetune_stages(model_cfg, data_cfg, ft_cfg, cache, rendered)
    needs_pretrained = ckpt == "pretrained" or bool(finetune)
    stages = _pretrain_stages(pre_cfg, cache) if embedded and needs_pretrained and not _available(pre_path) else []
    stages += finetune
    if run_data is not None:
        synth = _synth_root(run_data, cache)
        if synth is not None and synth[0] not in rendered and not (synth[0] / "manifest.json").exists():
            stages.append(Stage(f"rendering {run_data.name}", synth[1] * _COST_S["rendered video"],
                                f"rendering {run_data.name}"))
    return stages


def _available(path: Path) -> bool:
    """A checkpoint in the cache, or one that ships with the repository (rebuilt without training)."""
    from tta.synth.shipped import shipped_file

    return path.exists() or shipped_file(path.name) is not None


def _pretrain_stages(pre_cfg: DictConfig, cache: Path) -> list[Stage]:
    from hydra.utils import instantiate

    corpus = instantiate(pre_cfg.pretrain_corpus)
    stages = []
    if not (cache / "data" / corpus.key() / "manifest.json").exists():
        stages.append(Stage("rendering the pretraining corpus", _COST_S["corpus image"] * corpus.n_images,
                            "pretraining corpus"))
    stages.append(Stage("encoding the pretraining captions", corpus.n_images * _COST_S["caption"], "encoding pretrain"))
    per_step = _COST_S["pretrain step"] * int(pre_cfg.batch_size) / 256
    stages.append(Stage("pretraining the embedded CLIP", int(pre_cfg.steps) * per_step, "training pretrain"))
    return stages


def _finetune_stages(model_cfg: DictConfig, data_cfg: DictConfig, ft_cfg: DictConfig, cache: Path,
                     rendered: set[Path]) -> list[Stage]:
    """Rendering the fine-tuning data (recorded in ``rendered``), decoding, caption encoding and fine-tuning."""
    stages = []
    synth = _synth_root(data_cfg, cache)
    videos, captions = (2400, 7200) if synth is None else synth[2:]
    if synth is not None and not (synth[0] / "manifest.json").exists():
        stages.append(Stage(f"rendering {data_cfg.name}", synth[1] * _COST_S["rendered video"],
                            f"rendering {data_cfg.name}"))
        rendered.add(synth[0])
    frames = int(data_cfg.get("num_frames") or 12) / 12
    stages.append(Stage(f"decoding the {data_cfg.name} train videos", videos * _COST_S["decoded video"] * frames,
                        "decoding train videos"))
    stages.append(Stage("encoding the fine-tuning captions", captions * _COST_S["caption"], "encoding finetune"))
    per_step = _COST_S["finetune step"] * int(ft_cfg.frames_per_sample) / 4 * int(ft_cfg.batch_size) / 128
    stages.append(Stage(f"fine-tuning {model_cfg.name} on {data_cfg.name}", int(ft_cfg.steps) * per_step,
                        "training finetune"))
    return stages


def _pretrained_path(pre_cfg: DictConfig, cache: Path) -> Path:
    return cache / "checkpoints" / f"pretrained-{_recipe_key(pre_cfg)}.pt"


def _finetuned_path(model_cfg: DictConfig, data_cfg: DictConfig, ft_cfg: DictConfig, pre_path: Path,
                    cache: Path) -> Path:
    """Where the fine-tuned checkpoint of ``ft_cfg`` lives (its key includes the pretrained checkpoint's name)."""
    key = _recipe_key(ft_cfg) + hashlib.sha256(str(pre_path.name).encode()).hexdigest()[:4]
    return cache / "checkpoints" / f"{model_cfg.name}-{data_cfg.name}-{key}.pt"


def load_model(model_cfg: DictConfig, checkpoint: str | None = "auto", data_cfg: DictConfig | None = None,
               cache: Path | None = None, recipe: list[str] | None = None) -> RetrievalModel:
    """The model of a run: the embedded model's ``auto`` (fine-tuned on ``data_cfg``) and ``pretrained``
    checkpoints are built here on first use; every other case is :func:`tta.models.factory.model_from_config`."""
    ckpt = str(checkpoint) if checkpoint is not None else "none"
    if ckpt in ("auto", "pretrained") and model_cfg.arch == EMBEDDED:
        path = ensure_embedded_checkpoint(model_cfg, data_cfg, cache, pretrained_only=ckpt == "pretrained",
                                          recipe=recipe)
        try:
            return load_checkpoint(path, head=head_name(model_cfg), text_pool=text_pool(model_cfg))
        except CorruptFileError as e:  # a cache entry: rebuilt, not reported (a damaged pretrained one goes too)
            log.warning("%s; rebuilding the embedded checkpoint", e)
            with file_lock(path.with_suffix(".lock"), "the embedded checkpoint"):
                path.unlink(missing_ok=True)
            path = ensure_embedded_checkpoint(model_cfg, data_cfg, cache, pretrained_only=ckpt == "pretrained",
                                              recipe=recipe)
            return load_checkpoint(path, head=head_name(model_cfg), text_pool=text_pool(model_cfg))
    return model_from_config(model_cfg, ckpt)
