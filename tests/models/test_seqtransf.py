"""CLIP4Clip-seqTransf (tta/models/heads.py SeqTransfHead): its shape contract, the formula, order sensitivity
(where meanP is order-free), the gallery memo, where its LayerNorms sit, and that adding it left the embedded
checkpoint keys of the default models as they were."""

from __future__ import annotations

import hashlib

import pytest
import torch
import torch.nn.functional as F

from tests.fixtures import TINY_FRAMES, tiny_model
from tta.models.heads import HEADS, MeanPHead, SeqTransfHead
from tta.models.retrieval import FeatureModel

pytestmark = pytest.mark.usefixtures("single_thread_torch")
D = 32


def head(seed: int = 0) -> SeqTransfHead:
    torch.manual_seed(seed)
    return SeqTransfHead(D).eval()


def test_shapes_and_registry():
    h = head()
    assert HEADS["seqtransf"] is SeqTransfHead and h.name == "seqtransf"
    text, video = torch.randn(3, D), torch.randn(5, 12, D)
    assert h(video).shape == (5, 12, D)
    assert h.pool_video(video).shape == (5, D)
    assert torch.allclose(h.pool_video(video).norm(dim=-1), torch.ones(5))
    assert h.similarity(text, video).shape == (3, 5)
    assert len(h.transformer.resblocks) == SeqTransfHead.LAYERS
    assert h.frame_position_embeddings.weight.shape == (SeqTransfHead.MAX_FRAMES, D)
    with pytest.raises(ValueError, match="77 frame positions"):
        h(torch.randn(1, 78, D))
    features = FeatureModel("seqtransf", D)  # data=features scores through the same head
    features.pool.load_state_dict(h.state_dict())
    assert torch.allclose(features.similarity(video, text), h.similarity(text, video).t(), atol=1e-6)


def test_similarity_is_the_formula():
    h = head()
    text, video = torch.randn(3, D), torch.randn(4, 6, D)
    x = video + h.frame_position_embeddings.weight[:6]
    g = h.transformer(x) + video  # residual to the input frames, without the positions
    v = F.normalize(F.normalize(g, dim=-1).mean(1), dim=-1)
    assert torch.allclose(h.similarity(text, video), F.normalize(text, dim=-1) @ v.t(), atol=1e-6)


def test_without_the_temporal_module_it_is_meanp():
    """Zero positions and zero block outputs leave g = 2 f: the residual makes seqTransf start from meanP."""
    h = head()
    with torch.no_grad():
        h.frame_position_embeddings.weight.zero_()
        for block in h.transformer.resblocks:
            for lin in (block.attn.out_proj, block.mlp.c_proj):
                lin.weight.zero_()
                lin.bias.zero_()
    text, video = torch.randn(3, D), torch.randn(4, 6, D)
    assert torch.allclose(h.similarity(text, video), MeanPHead().similarity(text, video), atol=1e-6)


def test_order_sensitive_unlike_meanp():
    h, meanp = head(), MeanPHead()
    text, video = torch.randn(3, D), torch.randn(4, 8, D)
    for perm in (torch.arange(8).flip(0), torch.tensor([1, 0, 2, 3, 4, 5, 6, 7]), torch.randperm(8)):
        if torch.equal(perm, torch.arange(8)):
            continue
        shuffled = video[:, perm]
        assert torch.allclose(meanp.similarity(text, shuffled), meanp.similarity(text, video), atol=1e-6)
        diff = (h.pool_video(shuffled) - h.pool_video(video)).abs().max()
        assert diff > 1e-4, f"seqTransf ignored the frame permutation {perm.tolist()}"


def test_gallery_memo_follows_frames_and_parameters():
    h = head().requires_grad_(False)  # as the adapters leave it (every parameter frozen but the query LayerNorms)
    text, video = torch.randn(3, D, requires_grad=True), torch.randn(4, 6, D)
    first = h.similarity(text, video)
    assert first.requires_grad  # the text side keeps its graph (t2v adaptation), the pooled gallery is memoised
    assert h._memo is not None and h._memo[0] is video
    assert torch.equal(h.similarity(text, video), first)  # memo hit
    with torch.no_grad():
        video[0, 0] += 1.0  # in place: a new version of the same tensor
    assert not torch.equal(h.similarity(text, video), first)
    second = h.similarity(text, video)
    with torch.no_grad():
        h.transformer.resblocks[0].ln_1.weight.mul_(1.5)  # a parameter changed in place
    assert not torch.equal(h.similarity(text, video), second)
    # frames that need a gradient (v2t queries) or a head that trains carry the graph, without a memo
    h.requires_grad_(True)
    video.requires_grad_(True)
    out = h.similarity(text, video)
    out.sum().backward()
    assert video.grad is not None and h.frame_position_embeddings.weight.grad is not None
    import copy

    assert copy.deepcopy(h)._memo is None
    with torch.inference_mode():  # inference tensors keep no version: computed, not memoised
        frames = torch.randn(2, 6, D)
        assert h.similarity(text, frames).shape == (3, 2)


def test_head_layernorms_are_not_query_encoder_parameters():
    """The adapters update the query tower's LayerNorms (v2t: the vision tower); seqTransf's LayerNorms belong to
    the similarity head, which no adapter updates (as X-Pool's)."""
    m = tiny_model("seqtransf")
    head_lns = {id(mod) for mod in m.pool.modules() if isinstance(mod, torch.nn.LayerNorm)}
    assert len(head_lns) == 2 * SeqTransfHead.LAYERS
    for side in ("video", "text"):
        assert not head_lns & {id(ln) for _, ln in m.layer_norms(side)}
    frames = m.encode_video(torch.randn(2, TINY_FRAMES, 3, m.image_size, m.image_size))
    assert frames.shape == (2, TINY_FRAMES, 32)


# ---------------------------------------------------------------------------------------- checkpoint keys
def _checkpoint_names(model: str, data: str, recipe: tuple[str, ...] = ()) -> tuple[str, str, int]:
    """(pretrained file, fine-tuned file, frames per sample) the embedded zoo would use, computed without training."""
    from pathlib import Path

    from tta.synth.zoo import _recipe_key, _train_cfg
    from tta.utils.config import compose

    cfg = compose("run", [f"model={model}", f"data={data}"])
    cache = Path("/nonexistent-cache")
    pre = _train_cfg("pretrain", cfg.model, None, cache, list(recipe))
    pre_name = f"pretrained-{_recipe_key(pre)}.pt"
    ft = _train_cfg("finetune", cfg.model, cfg.data, cache, list(recipe))
    ft.init = str(cache / "checkpoints" / pre_name)
    key = _recipe_key(ft) + hashlib.sha256(pre_name.encode()).hexdigest()[:4]
    return pre_name, f"{cfg.model.name}-{cfg.data.name}-{key}.pt", int(ft.frames_per_sample)


# the files the default configs built before seqTransf existed (and still name: they must not be rebuilt)
KNOWN = {("clip4clip", "synth"): "clip4clip-synth-cd9a72cf5dbad0.pt",
         ("clip4clip", "synth_b"): "clip4clip-synth_b-d08da76870bad0.pt",
         ("xpool", "synth"): "xpool-synth-7f307701a8bad0.pt",
         ("xpool", "synth_b"): "xpool-synth_b-60b37c39fabad0.pt"}


@pytest.mark.parametrize(("model", "data"), sorted(KNOWN))
def test_default_models_keep_their_checkpoint_keys(model, data):
    pre, fine, frames = _checkpoint_names(model, data)
    assert pre == "pretrained-e78eba8cbe.pt" and fine == KNOWN[model, data] and frames == 4


def test_seqtransf_shares_the_pretrained_model_and_trains_on_every_frame():
    pre, fine, frames = _checkpoint_names("clip4clip_seqtransf", "synth_comp")
    assert pre == "pretrained-e78eba8cbe.pt"  # the same embedded "CLIP": only the fine-tuning differs
    assert fine.startswith("clip4clip_seqtransf-synth_comp-") and frames == 12
    assert fine != _checkpoint_names("clip4clip", "synth_comp")[1]
    # an explicit recipe option wins over the model's own fine-tuning option
    assert _checkpoint_names("clip4clip_seqtransf", "synth_comp", ("frames_per_sample=4",))[2] == 4
