"""Checkpoints of ``tta``: the model config, the weights, the training config and metrics in one file.

``load_checkpoint`` rebuilds the exact architecture from the stored config and loads strictly; a file of another
architecture or format fails with a message that names what does not match.
"""

from __future__ import annotations

import copy
import logging
import os
from pathlib import Path
from typing import Any

from tta.models.retrieval import RetrievalModel
from tta.models.towers import TowerConfig
from tta.utils.io import atomic_torch_save, torch_load
from tta.utils.reuse import file_identity, reuse

log = logging.getLogger(__name__)
FORMAT = "tta-checkpoint/1"


def save_checkpoint(path: str | os.PathLike, model: RetrievalModel, train_config: dict | None = None,
                    metrics: dict | None = None) -> Path:
    blob = {"format": FORMAT, "model_config": model.config(), "state_dict": model.state_dict(),
            "train_config": train_config, "metrics": metrics}
    return atomic_torch_save(path, blob)


def read_checkpoint(path: str | os.PathLike) -> dict[str, Any]:
    """The raw checkpoint dict, validated."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"checkpoint {path} does not exist; set model.checkpoint to an existing file, "
                                f"'auto' (embedded checkpoints are built on first use) or 'none'")
    blob = torch_load(path, "checkpoint", "copy or convert it again (tta.models.convert), or rebuild it with "
                      "tta.train", weights_only=False)
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        raise ValueError(f"{path} is not a tta checkpoint (format {FORMAT!r} expected). Official X-Pool / CLIP4Clip "
                         f"checkpoints must be converted first (tta.models.convert), plain open_clip weights go to "
                         f"model.pretrained")
    return blob


def load_checkpoint(path: str | os.PathLike, head: str | None = None, expect_arch: str | None = None,
                    text_pool: str | None = None) -> RetrievalModel:
    """Rebuild and load a model (in a process that loaded this very file before, a copy of the model it built:
    :mod:`tta.utils.reuse`).

    Args:
        path: checkpoint file.
        head: similarity head to use; if it differs from the stored one (e.g. X-Pool fine-tuning initialised from a
            pretrained CLIP), the towers are loaded and the new head starts from its own initialisation.
        expect_arch: if given, the stored tower architecture must equal it.
        text_pool: text pooling to use (``mean`` / ``clauses``); a clause pooling the file does not hold starts from
            its own initialisation (fine-tuning from the pretrained model); one the file holds cannot be dropped.
    """
    if not os.path.exists(path):
        read_checkpoint(path)  # its error
    key = (file_identity(path), head, expect_arch, text_pool)
    # a head or pooling the file does not hold starts from its initialisation: the build draws from the generator
    return reuse("model", key, lambda: _load(path, head, expect_arch, text_pool), copy_model, draws_rng=True)


def copy_model(model: RetrievalModel) -> RetrievalModel:
    """An independent copy of ``model``; its tokenizer (stateless, slow to copy) is shared."""
    tokenizer = getattr(model, "_tokenizer", None)
    return copy.deepcopy(model, memo={id(tokenizer): tokenizer} if tokenizer is not None else None)


def _load(path: str | os.PathLike, head: str | None, expect_arch: str | None, text_pool: str | None) -> RetrievalModel:
    blob = read_checkpoint(path)
    cfg = blob["model_config"]
    tower = TowerConfig(**cfg["tower"])
    if expect_arch and tower.arch != expect_arch:
        raise ValueError(f"checkpoint {path} holds a model of architecture {tower.arch!r} but the config asks for "
                         f"{expect_arch!r}; choose the matching model.arch or another checkpoint")
    head = head or cfg["head"]
    stored_pool = cfg.get("text_pool", "mean")
    text_pool = text_pool or stored_pool
    if stored_pool != "mean" and text_pool != stored_pool:  # its trained weights would be lost without a word
        raise ValueError(f"checkpoint {path} was trained with model.text_pool={stored_pool}; set "
                         f"model.text_pool={stored_pool} to load it")
    model = RetrievalModel(tower, head=head, text_pool=text_pool, weights_follow=True)  # both towers' come next
    state = blob["state_dict"]
    fresh = tuple(prefix for prefix, changed in (("pool.", head != cfg["head"]),
                                                 ("text_clauses.", text_pool != stored_pool)) if changed)
    if fresh:
        state = {k: v for k, v in state.items() if not k.startswith(fresh)}
        result = model.load_state_dict(state, strict=False)
        missing = [k for k in result.missing_keys if not k.startswith(fresh)]
        if missing or result.unexpected_keys:
            raise ValueError(f"{path}: towers do not match ({missing[:5]} missing, {result.unexpected_keys[:5]} unexpected)")
        log.info("loaded towers of %s; %s start from their initialisation", path,
                 " and ".join(f"the new {head} head" if f == "pool." else f"the {text_pool} text pooling" for f in fresh))
    else:
        try:
            model.load_state_dict(state, strict=True)
        except RuntimeError as e:
            raise ValueError(f"checkpoint {path} does not fit the architecture it declares: {str(e)[:600]}") from e
    return model.eval()
