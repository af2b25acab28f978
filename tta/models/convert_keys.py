"""Parameter-name maps of the official X-Pool and CLIP4Clip checkpoints onto ``tta``'s modules (docs/methods/protocol.md).

Both official models keep CLIP under ``clip.``, in one of two layouts:

* **OpenAI** (CLIP4Clip's ``modules/module_clip.py``; X-Pool without ``--huggingface``): the names of OpenAI's
  ``clip.model.CLIP`` (``visual.conv1.weight``, ``visual.transformer.resblocks.<i>.attn.in_proj_weight``,
  ``token_embedding.weight``, ``text_projection`` ...). open_clip uses the same names, so they map one to one.
* **Hugging Face** (``transformers.CLIPModel``; X-Pool's published checkpoints were trained with ``--huggingface``,
  and so is the CLIP4Clip baseline of the HAT-VTR code base): ``vision_model.encoder.layers.<i>.self_attn.q_proj``,
  ``text_model.embeddings.token_embedding`` ... mapped onto the OpenAI names by :func:`hf_to_openai`
  (q/k/v projections concatenated into ``in_proj``; projection matrices transposed).

X-Pool's pooling head ``pool_frames.`` (``modules/transformer.py``: ``cross_attn.{q,k,v,out}_proj``,
``linear_proj``, ``layer_norm{1,2,3}``) maps onto :class:`~tta.models.xpool.XPoolHead` (:data:`XPOOL_HEAD_MAP`).
CLIP4Clip-meanP has no parameters beyond CLIP; CLIP4Clip-seqTransf's ``frame_position_embeddings.`` and
``transformerClip.`` (CLIP residual attention blocks) map by prefix onto :class:`~tta.models.heads.SeqTransfHead`
(:data:`SEQTRANSF_HEAD_MAP`), whose blocks keep CLIP's parameter names.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch

__all__ = ["HF_IGNORED", "SEQTRANSF_HEAD_MAP", "XPOOL_HEAD_MAP", "hf_to_openai", "infer_clip_config", "match_open_clip_arch"]

# buffers of old transformers versions that are not parameters
HF_IGNORED = re.compile(r"(^|\.)position_ids$")

# X-Pool pool_frames.<name> -> tta pool.<name>
XPOOL_HEAD_MAP = {
    "cross_attn.q_proj": "q_proj", "cross_attn.k_proj": "k_proj", "cross_attn.v_proj": "v_proj",
    "cross_attn.out_proj": "out_proj", "linear_proj": "linear_proj",
    "layer_norm1": "layer_norm1", "layer_norm2": "layer_norm2", "layer_norm3": "layer_norm3",
}

# CLIP4Clip seqTransf <prefix> -> tta pool.<prefix> (the rest of each name is the same)
SEQTRANSF_HEAD_MAP = {"frame_position_embeddings.": "frame_position_embeddings.", "transformerClip.": "transformer."}

_T: Callable[[torch.Tensor], torch.Tensor] = lambda w: w.t().contiguous()  # noqa: E731
_SAME: Callable[[torch.Tensor], torch.Tensor] = lambda w: w  # noqa: E731

# OpenAI name <- (HF names, transform); {p} = text or vision prefix handled below
_GLOBAL = [
    ("token_embedding.weight", ["text_model.embeddings.token_embedding.weight"], _SAME),
    ("positional_embedding", ["text_model.embeddings.position_embedding.weight"], _SAME),
    ("ln_final.weight", ["text_model.final_layer_norm.weight"], _SAME),
    ("ln_final.bias", ["text_model.final_layer_norm.bias"], _SAME),
    ("text_projection", ["text_projection.weight"], _T),
    ("visual.class_embedding", ["vision_model.embeddings.class_embedding"], _SAME),
    ("visual.conv1.weight", ["vision_model.embeddings.patch_embedding.weight"], _SAME),
    ("visual.positional_embedding", ["vision_model.embeddings.position_embedding.weight"], _SAME),
    ("visual.ln_pre.weight", ["vision_model.pre_layrnorm.weight"], _SAME),
    ("visual.ln_pre.bias", ["vision_model.pre_layrnorm.bias"], _SAME),
    ("visual.ln_post.weight", ["vision_model.post_layernorm.weight"], _SAME),
    ("visual.ln_post.bias", ["vision_model.post_layernorm.bias"], _SAME),
    ("visual.proj", ["visual_projection.weight"], _T),
    ("logit_scale", ["logit_scale"], _SAME),
]
_LAYER = [
    ("attn.in_proj_weight", ["self_attn.q_proj.weight", "self_attn.k_proj.weight", "self_attn.v_proj.weight"]),
    ("attn.in_proj_bias", ["self_attn.q_proj.bias", "self_attn.k_proj.bias", "self_attn.v_proj.bias"]),
    ("attn.out_proj.weight", ["self_attn.out_proj.weight"]), ("attn.out_proj.bias", ["self_attn.out_proj.bias"]),
    ("ln_1.weight", ["layer_norm1.weight"]), ("ln_1.bias", ["layer_norm1.bias"]),
    ("ln_2.weight", ["layer_norm2.weight"]), ("ln_2.bias", ["layer_norm2.bias"]),
    ("mlp.c_fc.weight", ["mlp.fc1.weight"]), ("mlp.c_fc.bias", ["mlp.fc1.bias"]),
    ("mlp.c_proj.weight", ["mlp.fc2.weight"]), ("mlp.c_proj.bias", ["mlp.fc2.bias"]),
]


def _layers(state: dict[str, torch.Tensor], prefix: str) -> list[int]:
    pat = re.compile(re.escape(prefix) + r"(\d+)\.")
    return sorted({int(m.group(1)) for k in state if (m := pat.match(k))})


def hf_to_openai(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], list[tuple[str, str]]]:
    """Maps ``transformers.CLIPModel`` names (without the ``clip.`` prefix) onto OpenAI / open_clip names.

    Returns:
        ``(openai_state, mapped)``: the converted tensors and ``(HF name(s), OpenAI name)`` rows for the report.
        HF keys that no rule uses are simply not consumed (the caller reports them).
    """
    rules = list(_GLOBAL)
    for hf_pre, oa_pre in (("text_model.encoder.layers.", "transformer.resblocks."),
                           ("vision_model.encoder.layers.", "visual.transformer.resblocks.")):
        for i in _layers(state, hf_pre):
            rules += [(f"{oa_pre}{i}.{oa}", [f"{hf_pre}{i}.{h}" for h in hfs], None) for oa, hfs in _LAYER]
    out: dict[str, torch.Tensor] = {}
    mapped: list[tuple[str, str]] = []
    for oa, hfs, fn in rules:
        if not all(h in state for h in hfs):
            continue
        tensors = [state[h] for h in hfs]
        out[oa] = torch.cat(tensors, 0) if len(tensors) > 1 else (fn or _SAME)(tensors[0])
        mapped.append((" + ".join(hfs), oa))
    return out, mapped


def infer_clip_config(state: dict[str, torch.Tensor], quick_gelu: bool = True) -> dict:
    """open_clip ``CLIP`` kwargs of an OpenAI-layout ViT state dict, read from the tensor shapes.

    Heads are ``width // 64`` (OpenAI's convention, which every released CLIP ViT follows).

    Raises:
        ValueError: For a ResNet CLIP, a 3-D patch embedding (CLIP4Clip ``linear_patch=3d``) or missing tensors.
    """
    if "visual.conv2.weight" in state:
        raise ValueError("the checkpoint has clip.visual.conv2 (CLIP4Clip --linear_patch 3d); only the 2-D patch "
                         "embedding of CLIP is supported")
    need = ("visual.conv1.weight", "visual.positional_embedding", "visual.proj", "text_projection",
            "positional_embedding", "token_embedding.weight", "ln_final.weight")
    absent = [k for k in need if k not in state]
    if absent:
        hint = " (a ResNet CLIP? only ViT backbones are supported)" if "visual.layer1.0.conv1.weight" in state else ""
        raise ValueError(f"cannot infer the CLIP architecture: missing {absent}{hint}")
    v_width, _, patch, _ = state["visual.conv1.weight"].shape
    grid = round((state["visual.positional_embedding"].shape[0] - 1) ** 0.5)
    t_width = state["ln_final.weight"].shape[0]
    v_layers = _layers(state, "visual.transformer.resblocks.")
    t_layers = _layers(state, "transformer.resblocks.")
    v_mlp = state["visual.transformer.resblocks.0.mlp.c_fc.weight"].shape[0] / v_width
    t_mlp = state["transformer.resblocks.0.mlp.c_fc.weight"].shape[0] / t_width
    return {
        "embed_dim": int(state["text_projection"].shape[1]),
        "quick_gelu": quick_gelu,
        "vision_cfg": {"image_size": int(patch * grid), "layers": len(v_layers), "width": int(v_width),
                       "patch_size": int(patch), "head_width": 64, "mlp_ratio": float(v_mlp)},
        "text_cfg": {"context_length": int(state["positional_embedding"].shape[0]),
                     "vocab_size": int(state["token_embedding.weight"].shape[0]), "width": int(t_width),
                     "heads": max(1, int(t_width) // 64), "layers": len(t_layers), "mlp_ratio": float(t_mlp)},
    }


_DEFAULTS = {"vision_cfg": {"head_width": 64, "mlp_ratio": 4.0}, "text_cfg": {"mlp_ratio": 4.0}}


def _normalised(cfg: dict) -> tuple | None:
    parts: list = [cfg.get("embed_dim"), bool(cfg.get("quick_gelu", False))]
    for tower, keys in (("vision_cfg", ("image_size", "layers", "width", "patch_size", "head_width", "mlp_ratio")),
                        ("text_cfg", ("context_length", "vocab_size", "width", "heads", "layers", "mlp_ratio"))):
        sub = {**_DEFAULTS[tower], **cfg.get(tower, {})}
        if set(sub) - set(keys):  # a config with options beyond plain CLIP (layer scale, no ln_pre, ...)
            return None
        parts += [float(sub.get(k)) if k == "mlp_ratio" else sub.get(k) for k in keys]
    return tuple(parts)


def match_open_clip_arch(cfg: dict) -> str | None:
    """The open_clip model name whose config equals ``cfg`` (e.g. ``ViT-B-32-quickgelu``), or ``None``."""
    import open_clip

    target = _normalised(cfg)
    for name in sorted(open_clip.list_models()):
        other = open_clip.get_model_config(name)
        if other and _normalised(other) == target:
            return name
    return None
