"""Backbones: shapes, the two similarity functions against independent formulas, LayerNorm sets, checkpoints."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from tta.models.checkpoint import load_checkpoint, save_checkpoint
from tta.models.retrieval import build_model


@pytest.fixture(scope="module")
def models():
    torch.manual_seed(0)
    return {h: build_model(head=h).eval() for h in ("meanp", "xpool")}


def test_shapes_and_directions(models):
    for m in models.values():
        tokens = m.tokenize(["a red circle moves left", "a big blue square stays still on sand"])
        text = m.encode_text(tokens)
        video = m.encode_video(torch.randn(3, 12, 3, 64, 64))
        assert text.shape == (2, 256) and video.shape == (3, 12, 256)
        v2t = m.similarity(video, text)
        t2v = m.similarity(text, video)
        assert v2t.shape == (3, 2) and t2v.shape == (2, 3)
        assert torch.allclose(v2t, t2v.t(), atol=1e-6)
        with pytest.raises(ValueError, match="one video batch"):
            m.similarity(text, text)


def test_meanp_formula(models):
    m = models["meanp"]
    text, video = torch.randn(4, 256), torch.randn(5, 12, 256)
    expected = torch.empty(4, 5)
    for i in range(4):
        for j in range(5):
            frames = video[j] / video[j].norm(dim=-1, keepdim=True)
            v = frames.mean(0)
            expected[i, j] = (text[i] / text[i].norm()) @ (v / v.norm())
    assert torch.allclose(m.text_video_similarity(text, video), expected, atol=1e-5)


def _xpool_reference(head, text_i, frames_j):
    """X-Pool pooling of one (caption, video) pair, written from the paper's equations with explicit loops."""
    ln1, ln2, ln3 = head.layer_norm1, head.layer_norm2, head.layer_norm3
    c = ln1(text_i)
    f = ln1(frames_j)
    q = head.q_proj(c)
    logits = torch.stack([head.k_proj(f[t]) @ q for t in range(len(f))]) / math.sqrt(len(c))
    w = torch.softmax(logits, 0)
    pooled = sum(w[t] * head.v_proj(f[t]) for t in range(len(f)))
    out = ln2(head.out_proj(pooled))
    return ln3(out + head.linear_proj(out))


def test_xpool_matches_reference_and_is_scale_invariant(models):
    m = models["xpool"]
    torch.manual_seed(1)
    with torch.no_grad():  # move the head away from its identity init
        for p in m.pool.parameters():
            p.add_(0.05 * torch.randn_like(p))
    text, video = torch.randn(3, 256), torch.randn(4, 12, 256)
    sims = m.text_video_similarity(text, video)
    for i in range(3):
        for j in range(4):
            pooled = _xpool_reference(m.pool, text[i], video[j])
            ref = F.normalize(text[i], dim=0) @ F.normalize(pooled, dim=0)
            assert torch.allclose(sims[i, j], ref, atol=1e-5)
    assert torch.allclose(m.text_video_similarity(text, 7.0 * video), sims, atol=1e-4)


def test_query_side_layernorms(models):
    m = models["meanp"]
    vision = m.layer_norms("video")
    text = m.layer_norms("text")
    # small ViT: ln_pre + 2 per block x 3 + ln_post; MiniLM: embeddings + 2 per layer x 6
    assert len(vision) == 1 + 2 * 3 + 1
    assert len(text) == 1 + 2 * 6
    assert all(isinstance(ln, torch.nn.LayerNorm) for _, ln in vision + text)
    assert not any(n.startswith("pool") for n, _ in m.layer_norms("text"))


def test_checkpoint_round_trip_and_wrong_architecture(models, tmp_path):
    m = models["xpool"]
    path = save_checkpoint(tmp_path / "x.pt", m, train_config={"a": 1}, metrics={"r1": 1.0})
    loaded = load_checkpoint(path)
    for (k, v), (k2, v2) in zip(m.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert k == k2 and torch.equal(v, v2)
    # a pretrained meanP checkpoint initialises an X-Pool model (fresh head) ...
    p2 = save_checkpoint(tmp_path / "c.pt", models["meanp"])
    x = load_checkpoint(p2, head="xpool")
    assert torch.equal(x.clip.visual.conv1.weight, models["meanp"].clip.visual.conv1.weight)
    # ... but a declared architecture mismatch is a clear error
    with pytest.raises(ValueError, match="architecture 'embedded'.*ViT-B-32"):
        load_checkpoint(p2, expect_arch="ViT-B-32")
    torch.save({"state_dict": {}}, tmp_path / "foreign.pt")
    with pytest.raises(ValueError, match="not a tta checkpoint"):
        load_checkpoint(tmp_path / "foreign.pt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.pt")
