"""Import official X-Pool and CLIP4Clip fine-tuned checkpoints as ``tta`` checkpoints (docs/methods/protocol.md).

    python -m tta.models.convert --format xpool     model_best.pth        xpool_msrvtt9k.pt
    python -m tta.models.convert --format clip4clip pytorch_model.bin.4   clip4clip_msrvtt.pt

* ``xpool`` (layer6ai-labs/xpool, ``trainer/base_trainer.py``): ``{"epoch", "state_dict", "optimizer"}`` whose
  ``state_dict`` holds ``clip.*`` (Hugging Face ``CLIPModel`` names with ``--huggingface``, as for the published
  checkpoints; OpenAI names without) and ``pool_frames.*`` (the text-conditioned pooling head).
* ``clip4clip`` (ArrowLuo/CLIP4Clip, ``pytorch_model.bin.<epoch>``): a plain state dict of ``clip.*`` OpenAI names;
  meanP adds no parameters. A model trained with ``--sim_header seqTransf`` adds ``frame_position_embeddings.*``
  and ``transformerClip.*`` (the temporal transformer); the converter sees them and builds the ``seqtransf`` head
  (:class:`~tta.models.heads.SeqTransfHead`, CLIP4Clip's default 4 layers; load it under
  ``model=clip4clip_seqtransf``). ``seqLSTM`` (``lstm_visual.*``) and the tight ``cross.*`` model stay refused. The
  CLIP4Clip baseline of the X-Pool / HAT-VTR code base (``CLIPBaseline``, Hugging Face names, no head parameters)
  converts with the same format.

Names are mapped by :mod:`tta.models.convert_keys`; the CLIP architecture is read from the tensor shapes
(``ViT-B-32-quickgelu`` for the official ViT-B/32 checkpoints, ``arch: custom`` otherwise). Every official tensor
must land in the model and every model tensor must be filled: unmapped official keys (e.g. CLIP4Clip's ``cross.*``
of a model trained without ``--loose_type``, or a ``seqTransf`` head) stop the conversion with a report, unless
``--allow-unmapped`` is given. The output loads with ``model.checkpoint=<OUT>`` (and ``model.arch=<arch>`` as
printed) under ``model=xpool``, ``model=clip4clip`` or ``model=clip4clip_seqtransf``, the config of the converted
head (the printed ``use:`` line names it).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

from tta.models.checkpoint import save_checkpoint
from tta.models.convert_keys import (
    HF_IGNORED,
    SEQTRANSF_HEAD_MAP,
    XPOOL_HEAD_MAP,
    hf_to_openai,
    infer_clip_config,
    match_open_clip_arch,
)
from tta.models.heads import SeqTransfHead
from tta.models.retrieval import RetrievalModel
from tta.models.towers import CUSTOM, TowerConfig
from tta.models.weights import read_weights, unwrap_state_dict

log = logging.getLogger(__name__)

__all__ = ["FORMATS", "MODEL_OF_HEAD", "ConversionReport", "clip4clip_head", "convert_state_dict", "convert_checkpoint", "main"]

FORMATS = {"xpool": "xpool", "clip4clip": "meanp"}  # official format -> tta similarity head (clip4clip: unless seqTransf)
MODEL_OF_HEAD = {"xpool": "xpool", "meanp": "clip4clip", "seqtransf": "clip4clip_seqtransf"}  # the model= config

# official key prefixes we know but cannot map, with the reason
_UNSUPPORTED = {
    "cross.": "CLIP4Clip trained without --loose_type (tight cross-encoder similarity); only meanP is supported",
    "similarity_dense.": "CLIP4Clip trained without --loose_type (tight cross-encoder similarity)",
    "frame_position_embeddings.": "CLIP4Clip sim_header seqLSTM; only meanP and seqTransf are supported",
    "transformerClip.": "CLIP4Clip sim_header seqTransf with a layer tta's seqtransf head does not have",
    "lstm_visual.": "CLIP4Clip sim_header seqLSTM; only meanP and seqTransf are supported",
    "pool_frames.": "an X-Pool pooling head: convert with --format xpool",
}


@dataclass
class ConversionReport:
    """What went where. ``mapped`` rows are ``(official name(s), tta name)``."""

    fmt: str
    clip_layout: str
    arch: str
    head: str = ""
    mapped: list[tuple[str, str]] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    reasons: dict[str, str] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.unmapped and not self.missing

    def summary(self, limit: int = 20) -> str:
        lines = [f"format {self.fmt} (CLIP layout: {self.clip_layout}) -> tta arch {self.arch}, head {self.head}, "
                 f"{len(self.mapped)} tensors mapped, {len(self.ignored)} buffers ignored"]
        for title, keys in (("UNMAPPED official keys", self.unmapped), ("MISSING tta keys", self.missing)):
            if keys:
                lines.append(f"{title} ({len(keys)}):")
                lines += [f"  {k}" + (f"  [{self.reasons[k]}]" if k in self.reasons else "") for k in keys[:limit]]
                if len(keys) > limit:
                    lines.append(f"  ... and {len(keys) - limit} more")
        return "\n".join(lines)


def _layout(clip: dict[str, torch.Tensor]) -> str:
    if any(k.startswith(("vision_model.", "text_model.")) for k in clip):
        return "huggingface"
    if "visual.conv1.weight" in clip or any(k.startswith("visual.") for k in clip):
        return "openai"
    raise ValueError("no CLIP weights found under 'clip.' (expected OpenAI 'clip.visual.*' or Hugging Face "
                     "'clip.vision_model.*' names); is this an X-Pool / CLIP4Clip checkpoint?")


def _openai_clip(clip: dict[str, torch.Tensor], layout: str) -> tuple[dict, set[str], list[tuple[str, str]]]:
    """The CLIP tensors under OpenAI names, the official names used and the (official, tta) rows of the report."""
    if layout == "huggingface":
        oa_state, rows = hf_to_openai(clip)
        used = {"clip." + h for src, _ in rows for h in src.split(" + ")}
        mapped = [(" + ".join("clip." + h for h in src.split(" + ")), "clip." + dst) for src, dst in rows]
    else:
        oa_state = {k: v for k, v in clip.items() if not HF_IGNORED.search(k)}
        used = {"clip." + k for k in oa_state}
        mapped = [("clip." + k, "clip." + k) for k in oa_state]
    return oa_state, used, mapped


def _add_xpool_head(state: dict[str, torch.Tensor], ours: dict[str, torch.Tensor], used: set[str],
                    mapped: list[tuple[str, str]]) -> None:
    """Place X-Pool's ``pool_frames.*`` tensors under the tta head's names (in place)."""
    for off, tta_name in XPOOL_HEAD_MAP.items():
        for p in ("weight", "bias"):
            src = f"pool_frames.{off}.{p}"
            if src in state:
                ours[f"pool.{tta_name}.{p}"] = state[src]
                used.add(src)
                mapped.append((src, f"pool.{tta_name}.{p}"))


def clip4clip_head(state: dict[str, torch.Tensor]) -> str:
    """``seqtransf`` for a CLIP4Clip state dict with the temporal transformer (``--sim_header seqTransf``), else
    ``meanp`` (a seqLSTM or tight model then fails as unmapped, with the reason)."""
    if any(k.startswith("lstm_visual.") for k in state) or not any(k.startswith("transformerClip.") for k in state):
        return "meanp"
    layers = {int(k.split(".")[2]) for k in state if k.startswith("transformerClip.resblocks.")}
    if len(layers) != SeqTransfHead.LAYERS:
        raise ValueError(f"the CLIP4Clip seqTransf checkpoint has {len(layers)} temporal transformer layers "
                         f"(--cross_num_hidden_layers); tta's seqtransf head has CLIP4Clip's default "
                         f"{SeqTransfHead.LAYERS}")
    return "seqtransf"


def _add_seqtransf_head(state: dict[str, torch.Tensor], ours: dict[str, torch.Tensor], used: set[str],
                        mapped: list[tuple[str, str]]) -> None:
    """Place CLIP4Clip's ``frame_position_embeddings.*`` and ``transformerClip.*`` under ``pool.*`` (in place)."""
    for src, tensor in state.items():
        for off, tta_name in SEQTRANSF_HEAD_MAP.items():
            if src.startswith(off):
                dst = f"pool.{tta_name}{src[len(off):]}"
                ours[dst] = tensor
                used.add(src)
                mapped.append((src, dst))


def _check_complete(ours: dict[str, torch.Tensor], target: dict[str, torch.Tensor], report: ConversionReport,
                    allow_unmapped: bool) -> None:
    """Raise on a shape mismatch, a missing tensor or (without ``allow_unmapped``) an unmapped official one."""
    bad = [f"{k}: official {tuple(ours[k].shape)} vs tta {tuple(target[k].shape)}" for k in ours
           if ours[k].shape != target[k].shape]
    if bad:
        raise ValueError(f"cannot place the official tensors: {len(bad)} shape mismatches {bad[:3]}\n"
                         f"{report.summary()}")
    if report.missing or (report.unmapped and not allow_unmapped):
        raise ValueError(f"conversion incomplete:\n{report.summary()}\n"
                         + ("" if report.missing else "Use --allow-unmapped to convert the mapped part anyway."))


def convert_state_dict(state: dict[str, torch.Tensor], fmt: str, quick_gelu: bool = True,
                       allow_unmapped: bool = False) -> tuple[RetrievalModel, ConversionReport]:
    """Builds a :class:`RetrievalModel` holding the weights of an official state dict.

    Args:
        state: The official state dict (already unwrapped from ``{"state_dict": ...}``).
        fmt: ``xpool`` or ``clip4clip``.
        quick_gelu: OpenAI CLIP's activation (true for every OpenAI-initialised checkpoint).
        allow_unmapped: Convert even if official tensors are left over (they are listed in the report).

    Returns:
        The model (eval mode) and the report.

    Raises:
        ValueError: Unknown format, no CLIP weights, unsupported architecture, shape mismatch, missing tensors, or
            unmapped tensors (without ``allow_unmapped``); the message carries the report.
    """
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {sorted(FORMATS)}")
    clip = {k[len("clip."):]: v for k, v in state.items() if k.startswith("clip.")}
    layout = _layout(clip)
    ignored = sorted(k for k in state if k.startswith("clip.") and HF_IGNORED.search(k))
    oa_state, used, mapped = _openai_clip(clip, layout)
    cfg = infer_clip_config(oa_state, quick_gelu=quick_gelu)
    arch = match_open_clip_arch(cfg) or CUSTOM
    tower = TowerConfig(arch=arch, embed_dim=cfg["embed_dim"], quick_gelu=quick_gelu,
                        clip_cfg=cfg if arch == CUSTOM else None)
    head = clip4clip_head(state) if fmt == "clip4clip" else FORMATS[fmt]
    model = RetrievalModel(tower, head=head).eval()
    ours: dict[str, torch.Tensor] = {"clip." + k: v for k, v in oa_state.items()}
    if head == "xpool":
        _add_xpool_head(state, ours, used, mapped)
    elif head == "seqtransf":
        _add_seqtransf_head(state, ours, used, mapped)
    target = model.state_dict()
    for k in [k for k in ours if k not in target]:  # official names our model does not have: left unmapped
        ours.pop(k)
        used = {u for u in used if u != k}
        mapped = [row for row in mapped if row[1] != k]
    report = ConversionReport(fmt, layout, arch, head=head, mapped=mapped, ignored=ignored)
    report.unmapped = sorted(k for k in state if k not in used and k not in ignored)
    report.missing = sorted(k for k in target if k not in ours)
    for k in report.unmapped:
        reason = next((r for pre, r in _UNSUPPORTED.items() if k.startswith(pre)), None)
        if reason:
            report.reasons[k] = reason
    _check_complete(ours, target, report, allow_unmapped)
    model.load_state_dict({k: ours[k].to(target[k].dtype) for k in target}, strict=True)
    if report.unmapped:
        log.warning("converted with %d unmapped official tensors (allow_unmapped)", len(report.unmapped))
    return model, report


def convert_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, fmt: str, quick_gelu: bool = True,
                       allow_unmapped: bool = False, trust_pickle: bool = False) -> ConversionReport:
    """Converts an official checkpoint file into a ``tta-checkpoint/1`` file (see the module docstring)."""
    state = unwrap_state_dict(read_weights(src, trust_pickle=trust_pickle), src)
    model, report = convert_state_dict(state, fmt, quick_gelu=quick_gelu, allow_unmapped=allow_unmapped)
    provenance = {"converted_from": os.path.abspath(os.fspath(src)), "format": fmt, "clip_layout": report.clip_layout,
                  "unmapped": report.unmapped, "ignored": report.ignored}
    save_checkpoint(Path(dst), model, train_config=provenance)
    log.info("wrote %s (%s, head %s)", dst, report.arch, model.head_name)
    return report


def main(argv: list[str] | None = None) -> int:
    """CLI entry point; prints the report and returns the exit status (0 ok, 1 failed)."""
    ap = argparse.ArgumentParser(prog="python -m tta.models.convert", description=__doc__.split("\n")[0])
    ap.add_argument("--format", required=True, choices=sorted(FORMATS), help="official code base of IN")
    ap.add_argument("input", help="official checkpoint (X-Pool model_best.pth, CLIP4Clip pytorch_model.bin.N)")
    ap.add_argument("output", help="tta checkpoint to write (load it with model.checkpoint=OUTPUT)")
    ap.add_argument("--allow-unmapped", action="store_true", help="write even if official tensors are left over")
    ap.add_argument("--no-quick-gelu", action="store_true", help="the CLIP was not trained with QuickGELU")
    ap.add_argument("--trust-pickle", action="store_true", help="allow full unpickling of IN")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    try:
        report = convert_checkpoint(args.input, args.output, args.format, quick_gelu=not args.no_quick_gelu,
                                    allow_unmapped=args.allow_unmapped, trust_pickle=args.trust_pickle)
    except (ValueError, FileNotFoundError) as e:
        print(f"conversion failed: {e}", file=sys.stderr)
        return 1
    print(report.summary())
    print(f"use: model={MODEL_OF_HEAD[report.head]} model.checkpoint={args.output} model.arch={report.arch}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
