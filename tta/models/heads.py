"""Similarity heads of the retrieval model (HAT-VTR Sec. 4.1, Eq. 2), selected by ``model.head._target_``.

* :class:`MeanPHead` (CLIP4Clip-meanP): s(c, v) = <n(c), n(mean_l n(f_l))>, no parameters;
* :class:`SeqTransfHead` (CLIP4Clip-seqTransf): s(c, v) = <n(c), n(mean_l n(f_l + g_l))> with g the output of a
  small transformer over the frame sequence plus learned frame positions: the one head here that sees frame order;
* :class:`~tta.models.xpool.XPoolHead` (X-Pool): s(c, v) = <n(c), n(π(v | c))>.

Each head class carries the ``name`` checkpoints store (``meanp`` / ``seqtransf`` / ``xpool``), so a checkpoint
names its head without naming a Python path; :data:`HEADS` rebuilds a head from that name.
"""

from __future__ import annotations

from collections import OrderedDict

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


SEQ_LN_EPS = 1e-12  # CLIP4Clip's cross-module LayerNorm (the TF-style one of its until_module), not torch's 1e-5


class QuickGELU(nn.Module):
    """x · σ(1.702 x), the activation of OpenAI CLIP and of CLIP4Clip's temporal transformer."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.sigmoid(1.702 * x)


class FrameBlock(nn.Module):
    """One pre-LayerNorm residual block over a frame sequence: x + attn(ln_1(x)), then x + mlp(ln_2(x)).

    The parameter names (``attn.in_proj_weight``, ``ln_1``, ``mlp.c_fc`` ...) are those of CLIP's residual
    attention block, which CLIP4Clip's temporal transformer reuses, so official tensors map by prefix alone.
    """

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.ln_1 = nn.LayerNorm(dim, eps=SEQ_LN_EPS)
        self.attn = nn.MultiheadAttention(dim, heads, batch_first=True)
        self.ln_2 = nn.LayerNorm(dim, eps=SEQ_LN_EPS)
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(dim, 4 * dim)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(4 * dim, dim))]))

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, key_padding_mask=key_padding_mask)[0]
        return x + self.mlp(self.ln_2(x))


def bert_style_init(module: nn.Module) -> None:
    """CLIP4Clip's own initialisation for tensors it does not copy from CLIP (BERT-style: normal weights of std
    0.02, zero biases), for the linear maps, embeddings and attention projections of ``module``. A transformer so
    initialised adds little to a residual path, so a module built on one starts close to that path."""
    for mod in module.modules():
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            nn.init.normal_(mod.weight, std=0.02)
            if getattr(mod, "bias", None) is not None:
                nn.init.zeros_(mod.bias)
    for mod in module.modules():
        if isinstance(mod, nn.MultiheadAttention):
            nn.init.normal_(mod.in_proj_weight, std=0.02)
            nn.init.zeros_(mod.in_proj_bias)


class FrameTransformer(nn.Module):
    """``layers`` :class:`FrameBlock` in sequence over (N, T, D) frames (every frame attends to every frame; a
    ``key_padding_mask`` (N, T), True = padding, hides padded positions, as the clause pooling of captions needs)."""

    def __init__(self, dim: int, layers: int, heads: int):
        super().__init__()
        self.resblocks = nn.Sequential(*[FrameBlock(dim, heads) for _ in range(layers)])

    def forward(self, x: torch.Tensor, key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        for block in self.resblocks:
            x = block(x, key_padding_mask)
        return x


class SeqTransfHead(nn.Module):
    """CLIP4Clip-seqTransf (Luo et al., 2021, Sec. 3.3 "sequential type"): frame order enters the video embedding.

    The frame embeddings f_1..f_T get learned position embeddings p_1..p_T, pass through a small transformer
    (every frame attends to every other), and the transformer's output is added back to the *input* frames
    (the residual connection around the whole temporal module): g = Transformer(f + p) + f. The video embedding is
    then meanP's pooling of g, n(mean_l n(g_l)), and s(c, v) = <n(c), video embedding>. The pooled embedding does
    not depend on the caption, so a gallery is pooled once per call (and cached while neither the frames nor the
    head's parameters change, :meth:`pool_video`).

    The architecture is fixed by the name, as CLIP4Clip's defaults fix it: ``LAYERS`` = 4 blocks
    (``--cross_num_hidden_layers``), ``MAX_FRAMES`` = 77 position slots (CLIP's context length), D / 64 heads.
    Reversing the clip reverses which frame meets which position, so unlike meanP the embedding changes.

    Args:
        dim: embedding width D (the towers' output width).
        dropout: unused (the official temporal transformer has no dropout).
    """

    name = "seqtransf"
    LAYERS = 4
    MAX_FRAMES = 77

    def __init__(self, dim: int, dropout: float = 0.0):
        super().__init__()
        self.dim = int(dim)
        self.frame_position_embeddings = nn.Embedding(self.MAX_FRAMES, self.dim)
        self.transformer = FrameTransformer(self.dim, self.LAYERS, max(1, self.dim // 64))
        self._memo: tuple | None = None
        # the embedded towers have no CLIP text transformer of this width to copy from
        bert_style_init(self)

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, T, D) frame embeddings -> (N, T, D) temporally contextualised frames g = Transformer(f + p) + f."""
        t = frames.shape[1]
        if t > self.MAX_FRAMES:
            raise ValueError(f"the seqtransf head has {self.MAX_FRAMES} frame positions; got {t} frames per video "
                             f"(lower data.num_frames)")
        x = frames + self.frame_position_embeddings.weight[:t].to(frames.dtype)
        return self.transformer(x) + frames

    def pool_video(self, frames: torch.Tensor) -> torch.Tensor:
        """(N, T, D) frames -> (N, D) normalised video embeddings.

        Without autograd (inference, or frames and head both frozen, as for a t2v gallery) the last result is
        reused while the same frame tensor, unmodified, comes back and the head's parameters are unchanged.
        """
        needs_graph = torch.is_grad_enabled() and (frames.requires_grad or any(p.requires_grad for p in self.parameters()))
        if needs_graph or frames.is_inference():  # an inference tensor keeps no version counter: no memo
            return self._pool(frames)
        params = list(self.parameters())
        if any(p.is_inference() for p in params):
            return self._pool(frames)
        key = (frames._version, self.training, tuple(p._version for p in params), tuple(p.data_ptr() for p in params))
        memo = self._memo
        if memo is not None and memo[0] is frames and memo[1] == key:
            return memo[2]
        pooled = self._pool(frames).detach()
        self._memo = (frames, key, pooled)
        return pooled

    def _pool(self, frames: torch.Tensor) -> torch.Tensor:
        g = self(frames.float())
        return F.normalize(F.normalize(g, dim=-1).mean(dim=1), dim=-1)

    def similarity(self, text: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        """(Nt, D) captions x (Nv, T, D) frames -> (Nt, Nv) cosine similarities."""
        return F.normalize(text, dim=-1) @ self.pool_video(video).to(text.dtype).t()

    def __getstate__(self):  # the memo holds tensors that are not part of the head (copies, pickling)
        state = super().__getstate__() if hasattr(super(), "__getstate__") else self.__dict__.copy()
        state = dict(state)
        state["_memo"] = None
        return state


# the heads by the name a checkpoint stores
HEADS: dict[str, type[nn.Module]] = {MeanPHead.name: MeanPHead, SeqTransfHead.name: SeqTransfHead,
                                     XPoolHead.name: XPoolHead}


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
                         f"(or model=clip4clip / model=clip4clip_seqtransf / model=xpool)")
    return cls.name
