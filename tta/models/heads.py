"""Similarity heads of the retrieval model (HAT-VTR Sec. 4.1, Eq. 2), selected by ``model.head._target_``.

* :class:`MeanPHead` (CLIP4Clip-meanP): s(c, v) = <n(c), n(mean_l n(f_l))>, no parameters;
* :class:`~tta.models.xpool.XPoolHead` (X-Pool): s(c, v) = <n(c), n(π(v | c))>.

Each head class carries the ``name`` checkpoints store (``meanp`` / ``xpool``), so a checkpoint names its head
without naming a Python path; :data:`HEADS` rebuilds a head from that name.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from omegaconf import DictConfig
from torch import nn

from tta.models.xpool import XPoolHead


class MeanPHead(nn.Module):
    """CLIP4Clip-meanP: the mean of the normalised frame embeddings (no parameters, so nothing in a state dict).

    Args:
        dim: embedding width (unused; every head is built as ``head(dim, dropout)``).
        dropout: unused.
    """

    name = "meanp"

    def __init__(self, dim: int = 0, dropout: float = 0.0):
        super().__init__()

    def similarity(self, text: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        """(Nt, D) captions x (Nv, T, D) frames -> (Nt, Nv) cosine similarities."""
        t = F.normalize(text, dim=-1)
        v = F.normalize(F.normalize(video, dim=-1).mean(dim=1), dim=-1)
        return t @ v.t()


# the heads by the name a checkpoint stores
HEADS: dict[str, type[nn.Module]] = {MeanPHead.name: MeanPHead, XPoolHead.name: XPoolHead}


def head_name(model_cfg: DictConfig) -> str:
    """The name of the head ``model.head._target_`` selects (what checkpoints store)."""
    from tta.utils.config import import_target

    node = model_cfg.get("head")
    target = node.get("_target_") if isinstance(node, (dict, DictConfig)) else None
    choices = ", ".join(f"{cls.__module__}.{cls.__name__}" for cls in HEADS.values())
    try:
        cls = import_target(target) if target else None
    except Exception:  # noqa: BLE001 - any import failure is the same user error
        cls = None
    if cls is None or HEADS.get(getattr(cls, "name", None)) is not cls:
        raise ValueError(f"model.head._target_={target} is not a similarity head; use one of {choices} "
                         f"(or model=clip4clip / model=xpool)")
    return cls.name
