"""The in-memory tiny RetrievalModel of tests/fixtures.py (fast tier): both heads, both directions, the query-side
LayerNorm sets, a checkpoint round trip and the embedded-checkpoint recipe key - no rendered benchmark."""

from __future__ import annotations

import pytest
import torch
from omegaconf import OmegaConf

from tests.fixtures import TINY_FRAMES, TINY_SIZE, build_fast_env, tiny_model
from tta.models.checkpoint import load_checkpoint, save_checkpoint
from tta.models.encode import pairwise_similarity


@pytest.mark.parametrize("head", ["meanp", "seqtransf", "xpool"])
def test_tiny_model_shapes_and_directions(head):
    m = tiny_model(head)
    assert type(m).__name__ == "RetrievalModel" and m.head_name == head and m.image_size == TINY_SIZE
    video = m.encode_video(torch.randn(3, TINY_FRAMES, 3, TINY_SIZE, TINY_SIZE))
    text = m.encode_text(m.tokenize(["a red square moves right", "a blue circle moves up"]))
    assert video.shape == (3, TINY_FRAMES, 32) and text.shape == (2, 32)
    v2t, t2v = m.similarity(video, text), m.similarity(text, video)
    assert v2t.shape == (3, 2) and torch.allclose(v2t, t2v.t(), atol=1e-6)
    assert torch.allclose(pairwise_similarity(m, text, video), t2v, atol=1e-6)
    assert m.pool.name == head and (head != "meanp") == any(True for _ in m.pool.parameters())  # meanp: none


def test_tiny_model_is_seeded_and_fresh():
    a, b, c = tiny_model("meanp"), tiny_model("meanp"), tiny_model("meanp", seed=1)
    assert a is not b
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), c.state_dict().values(), strict=True))


def test_query_side_layernorms_are_disjoint():
    m = tiny_model("xpool")
    video = {id(ln) for _, ln in m.layer_norms("video")}
    text = {id(ln) for _, ln in m.layer_norms("text")}
    assert video and text and not video & text
    assert not text & {id(mod) for mod in m.pool.modules()}, "X-Pool's LayerNorms are not text-tower parameters"
    with pytest.raises(ValueError, match="side must be"):
        m.tower("audio")


@pytest.mark.parametrize("head", ["meanp", "seqtransf", "xpool"])
def test_checkpoint_round_trip(head, tmp_path):
    m = tiny_model(head)
    path = save_checkpoint(tmp_path / "tiny.pt", m, metrics={"R@1": 1.0})
    back = load_checkpoint(path, head=head)
    assert m.state_dict().keys() == back.state_dict().keys()
    assert all(torch.equal(x, y) for x, y in zip(m.state_dict().values(), back.state_dict().values(), strict=True))
    assert back.config() == m.config() and back.head_name == head
    video, text = torch.randn(3, TINY_FRAMES, 32), torch.randn(2, 32)
    assert torch.equal(back.similarity(text, video), m.similarity(text, video))


@pytest.mark.parametrize("task", ["v2t", "t2v"])
def test_fast_env_batches_match_the_runner_format(task):
    env = build_fast_env("meanp", task, batch_sizes=(3, 2), segments=(0, 0))
    assert [b["index"].tolist() for b in env.batches] == [[0, 1, 2], [3, 4]]
    assert all(b["segment"] == 0 for b in env.batches)
    if task == "v2t":
        assert env.batches[0]["video"].shape == (3, TINY_FRAMES, 3, TINY_SIZE, TINY_SIZE)
        assert env.gallery.shape == (8, 32)
    else:
        assert env.batches[0]["tokens"].dtype == torch.long and len(env.batches[0]["text"]) == 3
        assert env.gallery.shape == (8, TINY_FRAMES, 32)


def test_embedded_recipe_key_ignores_volatile_settings():
    from tta.synth.zoo import _recipe_key

    base = OmegaConf.create({"steps": 6, "lr": 1e-4, "workers": 1, "progress_bar": False, "data": {"name": "synth"}})
    other = OmegaConf.create({"steps": 6, "lr": 1e-4, "workers": 8, "progress_bar": True,
                              "data": {"name": "synth", "root_env": "X"}})
    assert _recipe_key(base) == _recipe_key(other)
    assert _recipe_key(base) != _recipe_key(OmegaConf.create({**OmegaConf.to_container(base), "steps": 7}))
