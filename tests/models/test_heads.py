"""``model.head._target_`` selects the similarity head (tta/models/heads.py): every model choice names a head class,
the class carries the name checkpoints store, and a wrong target is one clear error."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from omegaconf import OmegaConf

from tta.models.heads import HEADS, MeanPHead, head_name
from tta.models.xpool import XPoolHead
from tta.utils.config import CONF_DIR, compose

MODEL_CHOICES = sorted(p.stem for p in (Path(CONF_DIR) / "model").glob("*.yaml"))


@pytest.mark.parametrize("name", MODEL_CHOICES)
def test_every_model_choice_names_a_head_class(name):
    model = compose("run", [f"model={name}", "paths.cache_dir=/nonexistent"]).model
    assert head_name(model) == {"xpool": "xpool", "clip4clip_seqtransf": "seqtransf"}.get(name, "meanp")
    assert HEADS[head_name(model)].__name__ == model.head._target_.rsplit(".", 1)[1]


@pytest.mark.parametrize("target", ["tta.models.heads.NoSuchHead", "tta.models.retrieval.RetrievalModel", None])
def test_a_wrong_head_is_one_clear_error(target):
    cfg = OmegaConf.create({"name": "mine", "head": {"_target_": target} if target else "meanp"})
    with pytest.raises(ValueError, match=r"model.head._target_=.* is not a similarity head; use one of "
                                         r"tta.models.heads.MeanPHead, tta.models.heads.SeqTransfHead, "
                                         r"tta.models.xpool.XPoolHead"):
        head_name(cfg)


def test_heads_score_as_the_formulas():
    text, video = torch.randn(3, 32), torch.randn(4, 5, 32)
    t = torch.nn.functional.normalize(text, dim=-1)
    v = torch.nn.functional.normalize(torch.nn.functional.normalize(video, dim=-1).mean(1), dim=-1)
    assert torch.equal(MeanPHead().similarity(text, video), t @ v.t())
    assert list(MeanPHead().parameters()) == []  # nothing under pool.* in a meanp checkpoint
    xpool = XPoolHead(32).eval()
    pooled = torch.nn.functional.normalize(xpool(text, video), dim=-1)
    assert torch.equal(xpool.similarity(text, video), torch.einsum("nd,vnd->nv", t, pooled))
