"""Clause-sequence pooling of the text trunk (``model.text_pool=clauses``): the text twin of CLIP4Clip-seqTransf.

The default text tower mean-pools its trunk's token states over the whole caption, which keeps what a paragraph
says but little of the order in which it says it: on the embedded benchmark a multi-event paragraph and its
reordering sit at cosine 0.99 (docs/results/videocomp-probe.md). This pooling makes the order of clauses explicit:

1. the trunk runs once over the whole caption (its token states stay contextual);
2. the caption is cut into clauses at separator tokens (``,``, ``.``, ``;``): each clause is the mean of its
   content tokens' states (special and separator tokens excluded); empty clauses (a trailing period) leave no
   slot, and clauses past the last slot merge into it;
3. clause k gets a learned position embedding p_k, a small transformer runs over the clause sequence (padding
   masked), its output is added back to the clause features, and the caption embedding is the mean over clauses
   of g = Transformer(c + p) + c, followed by the tower's own projection.

A one-clause caption (most single-sentence captions) is then its content tokens' mean plus what the transformer
adds to one clause. The module's parameters train with the projection when the trunk is frozen, and its LayerNorms
belong to the text tower's set that test-time adapters update. Only the embedded text tower (all-MiniLM-L6-v2,
whose token states the pooling reads) has it.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tta.models.heads import FrameTransformer, bert_style_init

TEXT_POOLS = ("mean", "clauses")
SEPARATORS = (",", ".", ";")


class ClauseSequencePool(nn.Module):
    """Clause features (B, C, d) from the trunk's token states, and the caption feature (B, d) from them.

    Args:
        dim: the trunk's width d.
        separators: token ids that end a clause.
        special: token ids that are never content ([CLS], [SEP], padding).
    """

    MAX_CLAUSES = 8
    LAYERS = 2

    def __init__(self, dim: int, separators: list[int], special: list[int]):
        super().__init__()
        self.register_buffer("separators", torch.tensor(separators, dtype=torch.long), persistent=False)
        self.register_buffer("special", torch.tensor(special, dtype=torch.long), persistent=False)
        self.clause_position_embeddings = nn.Embedding(self.MAX_CLAUSES, dim)
        self.transformer = FrameTransformer(dim, self.LAYERS, max(1, dim // 64))
        bert_style_init(self)  # as seqTransf's: the module starts close to "the mean of the clauses"

    def clauses(self, states: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        """(B, L, d) token states and (B, L) token ids -> (B, C, d) clause means; rows past the last clause are 0."""
        c = self.MAX_CLAUSES
        sep = torch.isin(tokens, self.separators)
        content = ~sep & ~torch.isin(tokens, self.special)
        index = sep.long().cumsum(1).clamp(max=c - 1)
        member = F.one_hot(index, c).to(states.dtype) * content.unsqueeze(-1).to(states.dtype)  # (B, L, C)
        counts = member.sum(1)  # (B, C)
        pooled = torch.einsum("blc,bld->bcd", member, states) / counts.clamp(min=1).unsqueeze(-1)
        # empty clauses (a trailing period, ", ,") take no position: the others move up, in order
        slot = torch.arange(c, device=tokens.device)
        order = torch.argsort((counts == 0).long() * c + slot, dim=1)
        return pooled.gather(1, order.unsqueeze(-1).expand_as(pooled))

    def forward(self, clauses: torch.Tensor) -> torch.Tensor:
        """(B, C, d) clause features (zero rows = no clause) -> (B, d) caption features."""
        present = clauses.abs().sum(-1) > 0
        present[:, 0] = True  # an empty caption keeps one (zero) clause, so attention has a key
        x = clauses + self.clause_position_embeddings.weight[: clauses.shape[1]].to(clauses.dtype)
        g = self.transformer(x, key_padding_mask=~present) + clauses
        weight = present.unsqueeze(-1).to(g.dtype)
        return (g * weight).sum(1) / weight.sum(1)
