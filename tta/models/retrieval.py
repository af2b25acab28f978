"""The retrieval model: an open_clip dual encoder plus a similarity head (HAT-VTR Sec. 4.1, Eq. 2).

* head ``meanp`` (CLIP4Clip-meanP): s(c, v) = <n(c), n(mean_l n(f_l))>;
* head ``seqtransf`` (CLIP4Clip-seqTransf): meanP over g = Transformer(f + p) + f, the frame-order-aware head;
* head ``xpool`` (X-Pool): s(c, v) = <n(c), n(π(v | c))> (the heads: :mod:`tta.models.heads`).

Interface used by the data pipeline and the adapters:
``encode_video(frames: (B, T, 3, H, W)) -> (B, T, D)`` per-frame embeddings (after the visual projection, not
normalised), ``encode_text(tokens: (B, L)) -> (B, D)`` (the trunk's token states mean-pooled, or, with
``text_pool="clauses"``, pooled per clause and then over the clause sequence: :mod:`tta.models.text_clauses`), ``similarity(queries, gallery) -> (B, G)`` where a 3-D
tensor is a batch of videos and a 2-D tensor a batch of captions, so the same call serves v2t and t2v.
"""

from __future__ import annotations

from dataclasses import asdict

import torch
from torch import nn

from tta.models.heads import HEADS
from tta.models.text_clauses import SEPARATORS, TEXT_POOLS, ClauseSequencePool
from tta.models.towers import EMBEDDED, Tokenizer, TowerConfig, build_clip


class RetrievalModel(nn.Module):
    """Dual encoder + similarity head.

    Args:
        tower: the open_clip tower configuration.
        head: the name of a head of :data:`tta.models.heads.HEADS`: ``meanp`` (CLIP4Clip), ``seqtransf``
            (CLIP4Clip-seqTransf) or ``xpool``.
        xpool_dropout: dropout of the X-Pool residual branch (the other heads ignore it).
        text_pool: ``mean`` (the tower's own mean pooling) or ``clauses`` (:mod:`tta.models.text_clauses`; the
            embedded text tower only).
        weights_follow: the caller loads every tower weight next (:func:`tta.models.towers.build_clip`).
    """

    def __init__(self, tower: TowerConfig, head: str = "meanp", xpool_dropout: float = 0.3, text_pool: str = "mean",
                 weights_follow: bool = False):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"unknown similarity head {head!r}; choose one of {tuple(HEADS)}")
        if text_pool not in TEXT_POOLS:
            raise ValueError(f"model.text_pool must be one of {list(TEXT_POOLS)}, got {text_pool!r}")
        if text_pool != "mean" and tower.arch != EMBEDDED:
            raise ValueError(f"model.text_pool={text_pool} pools the token states of the embedded text tower; "
                             f"arch={tower.arch} has only its end-of-text feature: use model.text_pool=mean")
        self.tower_cfg = tower
        self.head_name = head
        self.text_pool = text_pool
        self.clip = build_clip(tower, weights_follow)
        # the head's width is the towers' output width (512 for ViT-B-32, whatever tower.embed_dim says)
        width = int(getattr(self.clip.visual, "output_dim", None) or tower.embed_dim)
        self.pool = HEADS[head](width, xpool_dropout)  # meanp has no parameters: nothing under pool.* then
        # (seqtransf's and xpool's parameters live under pool.*; no adapter updates them: layer_norms() is per tower)
        self._tokenizer: Tokenizer | None = None
        self.text_clauses: ClauseSequencePool | None = None
        if text_pool == "clauses":
            self.text_clauses = ClauseSequencePool(int(self.clip.text.config.hidden_size),
                                                   *self.tokenizer.clause_ids(SEPARATORS))

    # ----------------------------------------------------------------------------------------------- config
    def config(self) -> dict:
        """Everything needed to rebuild this module (stored in checkpoints)."""
        tower = asdict(self.tower_cfg)
        tower["pretrained"] = None  # weights come from the checkpoint itself
        out = {"tower": tower, "head": self.head_name}
        if self.text_pool != "mean":  # absent = mean: the configs of checkpoints made before the option
            out["text_pool"] = self.text_pool
        return out

    @property
    def image_size(self) -> int:
        return self.tower_cfg.image_size

    @property
    def tokenizer(self) -> Tokenizer:
        if self._tokenizer is None:
            self._tokenizer = Tokenizer(self.tower_cfg)
        return self._tokenizer

    def tokenize(self, texts: list[str]) -> torch.Tensor:
        return self.tokenizer(texts)

    # ---------------------------------------------------------------------------------------------- towers
    @property
    def visual(self) -> nn.Module:
        return self.clip.visual

    @property
    def text_tower(self) -> nn.Module:
        return self.clip.text if hasattr(self.clip, "text") else self.clip

    def tower(self, side: str) -> nn.Module:
        """``video`` -> the vision tower; ``text`` -> the text tower (for a native open_clip CLIP, the text
        transformer, token embedding and final LayerNorm live on the CLIP module itself)."""
        if side == "video":
            return self.visual
        if side == "text":
            return self.text_tower
        raise ValueError(f"side must be 'video' or 'text', got {side!r}")

    def layer_norms(self, side: str) -> list[tuple[str, nn.LayerNorm]]:
        """All ``nn.LayerNorm`` modules of one tower (the parameters HAT-VTR and the baselines adapt); the text
        side's include those of the clause pooling, which is part of the text encoder."""
        tower = self.tower(side)
        out = []
        for name, mod in tower.named_modules():
            if not isinstance(mod, nn.LayerNorm):
                continue
            if side == "text" and tower is self.clip and (name.startswith("visual") or name.startswith("pool")):
                continue
            out.append((name, mod))
        if side == "text" and self.text_clauses is not None:
            out += [(f"text_clauses.{n}", m) for n, m in self.text_clauses.named_modules() if isinstance(m, nn.LayerNorm)]
        return out

    # ---------------------------------------------------------------------------------------------- encode
    def encode_video(self, frames: torch.Tensor) -> torch.Tensor:
        """frames: (B, T, 3, H, W) normalised -> (B, T, D) per-frame embeddings."""
        b, t = frames.shape[:2]
        feats = self.clip.encode_image(frames.flatten(0, 1))
        return feats.reshape(b, t, -1)

    def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
        """tokens: (B, L) -> (B, D) caption embeddings."""
        if self.text_clauses is not None:
            return self.text_head(self.text_trunk(tokens))
        return self.clip.encode_text(tokens)

    def text_trunk(self, tokens: torch.Tensor) -> torch.Tensor:
        """Text features before the trained part of the text side (cached when the trunk is frozen during
        training): (B, d) pooled features, or (B, C, d) clause features with ``text_pool="clauses"``."""
        if self.tower_cfg.arch == EMBEDDED:
            text = self.clip.text
            mask = (tokens != text.config.pad_token_id).long()
            out = text.transformer(input_ids=tokens, attention_mask=mask)
            if self.text_clauses is not None:
                return self.text_clauses.clauses(out.last_hidden_state, tokens)
            return text.pooler(out, mask)
        clip = self.clip
        x = clip.token_embedding(tokens) + clip.positional_embedding
        x = clip.transformer(x, attn_mask=clip.attn_mask)
        x = clip.ln_final(x)
        return x[torch.arange(x.shape[0]), tokens.argmax(dim=-1)]

    def text_head(self, trunk: torch.Tensor) -> torch.Tensor:
        """The trained part of the text side applied to :meth:`text_trunk` features: the clause pooling (when
        there is one), then the final projection."""
        if self.tower_cfg.arch == EMBEDDED:
            if self.text_clauses is not None:
                trunk = self.text_clauses(trunk)
            return self.clip.text.proj(trunk)
        return trunk @ self.clip.text_projection

    def text_head_parameters(self) -> list[nn.Parameter]:
        if self.tower_cfg.arch == EMBEDDED:
            return list(self.clip.text.proj.parameters())
        return [self.clip.text_projection]

    def text_trunk_parameters(self) -> list[nn.Parameter]:
        """Every parameter of :meth:`text_trunk` (what ``freeze_text_trunk`` freezes); for a native CLIP the text
        modules sit on the CLIP module beside the vision tower, which is not part of it."""
        if self.tower_cfg.arch == EMBEDDED:
            head = {id(p) for p in self.text_head_parameters()}
            return [p for p in self.clip.text.parameters() if id(p) not in head]
        clip = self.clip
        return [*clip.token_embedding.parameters(), clip.positional_embedding, *clip.transformer.parameters(),
                *clip.ln_final.parameters()]

    def text_trunk_blocks(self) -> list[nn.Module]:
        """The transformer blocks of the text trunk, input side first."""
        if self.tower_cfg.arch == EMBEDDED:
            return list(self.clip.text.transformer.encoder.layer)
        return list(self.clip.transformer.resblocks)

    def text_trunk_top_parameters(self, layers: int) -> list[nn.Parameter]:
        """Parameters of the top ``layers`` trunk blocks (their LayerNorms included) and of what follows them before
        :meth:`text_head` (a CLIP text trunk's ``ln_final``; the embedded trunk's mean pooling has none)."""
        blocks = self.text_trunk_blocks()
        if not 0 < layers <= len(blocks):
            raise ValueError(f"text_trunk_trainable_layers={layers}: this text trunk has {len(blocks)} blocks; "
                             f"choose 1..{len(blocks)}, or 0 for a frozen trunk")
        params = [p for block in blocks[-layers:] for p in block.parameters()]
        if self.tower_cfg.arch != EMBEDDED:
            params += list(self.clip.ln_final.parameters())
        return params

    # ------------------------------------------------------------------------------------------ similarity
    def text_video_similarity(self, text: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        """Cosine similarity of every caption to every video.

        Args:
            text: (Nt, D) caption embeddings.
            video: (Nv, T, D) per-frame embeddings.

        Returns:
            (Nt, Nv) similarities (no temperature).
        """
        return self.pool.similarity(text, video)

    def similarity(self, queries: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
        """(B, G) similarity of queries to gallery; videos are 3-D (N, T, D), captions 2-D (N, D)."""
        return oriented_similarity(self.pool, queries, gallery)

    @property
    def logit_scale(self) -> torch.Tensor:
        return self.clip.logit_scale


def oriented_similarity(head: nn.Module, queries: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
    """(B, G) similarity of queries to gallery through a similarity head, whichever side holds the videos."""
    if queries.dim() == 3 and gallery.dim() == 2:
        return head.similarity(gallery, queries).t()
    if queries.dim() == 2 and gallery.dim() == 3:
        return head.similarity(queries, gallery)
    raise ValueError(f"similarity needs one video batch (N, T, D) and one caption batch (N, D); got shapes "
                     f"{tuple(queries.shape)} and {tuple(gallery.shape)}")


class FeatureModel(nn.Module):
    """The similarity head of a retrieval model without its towers: it scores precomputed features
    (``data=features``, :mod:`tta.data.features`), so only gradient-free methods can run on it.

    Args:
        head: the name of a head of :data:`tta.models.heads.HEADS`.
        dim: the embedding width.
    """

    def __init__(self, head: str, dim: int):
        super().__init__()
        if head not in HEADS:
            raise ValueError(f"unknown similarity head {head!r}; choose one of {tuple(HEADS)}")
        self.head_name = head
        self.pool = HEADS[head](dim, 0.0)

    def text_video_similarity(self, text: torch.Tensor, video: torch.Tensor) -> torch.Tensor:
        return self.pool.similarity(text, video)

    def similarity(self, queries: torch.Tensor, gallery: torch.Tensor) -> torch.Tensor:
        return oriented_similarity(self.pool, queries, gallery)


def build_model(arch: str = EMBEDDED, head: str = "meanp", pretrained: str | None = None, **tower_kwargs) -> RetrievalModel:
    """Convenience constructor used by the Hydra configs."""
    return RetrievalModel(TowerConfig(arch=arch, pretrained=pretrained, **tower_kwargs), head=head)
