"""X-Pool text-conditioned pooling (Gorti et al., CVPR 2022); docs/methods/protocol.md, "Backbones".

LayerNorm on caption and frames; single-head attention (query from the caption, keys and values from the frames,
logits scaled by 1/sqrt(D), softmax over the T frames); output projection, LayerNorm, a residual linear layer with
dropout, final LayerNorm. Linear weights start at the identity and biases at zero, as in the X-Pool code. The
first LayerNorm makes the result independent of the scale of its inputs.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn


class XPoolHead(nn.Module):
    """π(v | c): pool the frames of every video conditioned on every caption.

    Args:
        dim: embedding width D.
        dropout: dropout on the residual linear branch (inactive in eval mode).
    """

    name = "xpool"  # what checkpoints store (tta/models/heads.py)

    def __init__(self, dim: int, dropout: float = 0.3):
        super().__init__()
        self.q_proj = nn.Linear(dim, dim)
        self.k_proj = nn.Linear(dim, dim)
        self.v_proj = nn.Linear(dim, dim)
        self.out_proj = nn.Linear(dim, dim)
        self.linear_proj = nn.Linear(dim, dim)
        self.layer_norm1 = nn.LayerNorm(dim)
        self.layer_norm2 = nn.LayerNorm(dim)
        self.layer_norm3 = nn.LayerNorm(dim)
        self.dropout = nn.Dropout(dropout)
        self.dim = dim
        for name, p in self.named_parameters():
            if "proj" in name:
                if name.endswith("weight"):
                    nn.init.eye_(p)
                else:
                    nn.init.zeros_(p)

    def forward(self, text: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """Pool.

        Args:
            text: (Nt, D) caption embeddings.
            frames: (Nv, T, D) frame embeddings.

        Returns:
            (Nv, Nt, D) pooled video embedding of every video conditioned on every caption.
        """
        text = self.layer_norm1(text)
        frames = self.layer_norm1(frames)
        q = self.q_proj(text)  # (Nt, D)
        k = self.k_proj(frames)  # (Nv, T, D)
        v = self.v_proj(frames)  # (Nv, T, D)
        logits = torch.einsum("vtd,nd->vnt", k, q) / math.sqrt(self.dim)  # (Nv, Nt, T)
        attn = logits.softmax(dim=-1)
        pooled = torch.einsum("vnt,vtd->vnd", attn, v)  # (Nv, Nt, D)
        out = self.layer_norm2(self.out_proj(pooled))
        out = out + self.dropout(self.linear_proj(out))
        return self.layer_norm3(out)

    def similarity(self, text: torch.Tensor, frames: torch.Tensor) -> torch.Tensor:
        """(Nt, D) captions x (Nv, T, D) frames -> (Nt, Nv) cosine similarity of each caption to its pooled video."""
        t = F.normalize(text, dim=-1)
        pooled = F.normalize(self(text, frames), dim=-1)  # (Nv, Nt, D)
        return torch.einsum("nd,vnd->nv", t, pooled)
