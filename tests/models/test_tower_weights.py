"""Real-weights path of the towers (tta.models.towers, tta.models.weights): local ViT-B-32 state dicts, open_clip
tags, OpenAI's QuickGELU, and the architecture read from official checkpoint shapes (tta.models.convert_keys)."""

from __future__ import annotations

import open_clip
import pytest
import torch
from omegaconf import OmegaConf

from tta.models import towers
from tta.models.convert_keys import infer_clip_config, match_open_clip_arch
from tta.models.factory import model_from_config
from tta.models.retrieval import RetrievalModel
from tta.models.towers import TowerConfig
from tta.models.weights import read_weights, unwrap_state_dict


def model_cfg(**over):
    base = {"name": "clip4clip", "head": {"_target_": "tta.models.heads.MeanPHead"}, "arch": "ViT-B-32", "pretrained": None, "checkpoint": "none",
            "embed_dim": 256, "context_length": 64}
    return OmegaConf.create({**base, **over})


def test_local_vit_b32_state_dict_through_the_towers(tmp_path):
    torch.manual_seed(0)
    reference = open_clip.create_model("ViT-B-32", pretrained=None)
    with torch.no_grad():
        reference.logit_scale.fill_(1.234)  # a value no fresh model has
    path = tmp_path / "vit-b-32-random.pt"
    torch.save(reference.state_dict(), path)

    model = model_from_config(model_cfg(pretrained=str(path), head={"_target_": "tta.models.xpool.XPoolHead"}), checkpoint="none")
    ours = model.clip.state_dict()
    ref = reference.state_dict()
    assert ours.keys() == ref.keys() and len(ref) > 150
    assert all(torch.equal(ours[k], ref[k]) for k in ref)
    assert model.pool.q_proj.weight.shape == (512, 512)  # the X-Pool head follows the towers' width
    assert model.image_size == 224
    tokens = model.tokenize(["a man is cooking"])
    assert tokens.shape == (1, 77)
    with torch.no_grad():
        assert torch.allclose(model.encode_text(tokens), reference.encode_text(tokens), atol=1e-5)

    # a file of another architecture is a clear error
    tiny = {"embed_dim": 16, "vision_cfg": {"image_size": 32, "layers": 1, "width": 64, "patch_size": 16},
            "text_cfg": {"context_length": 8, "vocab_size": 50, "width": 64, "heads": 1, "layers": 1}}
    with pytest.raises(ValueError, match=r"does not match this architecture.*shape mismatches"):
        RetrievalModel(TowerConfig(arch="custom", clip_cfg=tiny, pretrained=str(path)))
    # an official fine-tuned checkpoint is not tower weights
    torch.save({"state_dict": {"clip.logit_scale": torch.zeros(())}}, tmp_path / "xpool.pth")
    with pytest.raises(ValueError, match="tta.models.convert"):
        RetrievalModel(TowerConfig(arch="ViT-B-32", pretrained=str(tmp_path / "xpool.pth")))


class Odd:
    """A non-tensor object inside a checkpoint (needs full unpickling)."""


def test_weight_files_unwrap(tmp_path):
    state = {"visual.proj": torch.randn(3, 2), "logit_scale": torch.tensor(1.0)}
    torch.save({"epoch": 1, "state_dict": {"module." + k: v for k, v in state.items()}}, tmp_path / "w.pt")
    out = unwrap_state_dict(read_weights(tmp_path / "w.pt"), tmp_path / "w.pt")
    assert out.keys() == state.keys() and all(torch.equal(out[k], state[k]) for k in state)
    from safetensors.torch import save_file

    save_file(state, tmp_path / "w.safetensors")
    assert torch.equal(read_weights(tmp_path / "w.safetensors")["visual.proj"], state["visual.proj"])

    torch.save({"state_dict": state, "cfg": Odd()}, tmp_path / "odd.pt")
    with pytest.raises(ValueError, match="trust_pickle"):
        read_weights(tmp_path / "odd.pt")
    assert torch.equal(read_weights(tmp_path / "odd.pt", trust_pickle=True)["state_dict"]["visual.proj"],
                       state["visual.proj"])
    with pytest.raises(ValueError, match="holds no tensors"):
        unwrap_state_dict({"epoch": 3})
    # OpenAI's official ViT-B-32.pt is a TorchScript archive: read as its state dict
    lin = torch.nn.Linear(3, 2)
    torch.jit.script(lin).save(str(tmp_path / "jit.pt"))
    jit = read_weights(tmp_path / "jit.pt")
    assert jit.keys() == {"weight", "bias"} and torch.equal(jit["weight"], lin.weight.detach())


def test_pretrained_tags_and_quick_gelu(monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"neither an existing weight file nor an open_clip tag.*openai"):
        RetrievalModel(TowerConfig(arch="ViT-B-16", pretrained="/no/such/ViT-B-16.pt"))
    assert "openai" in open_clip.list_pretrained_tags_by_model("ViT-B-16")

    calls = []
    create = open_clip.create_model

    def record(arch, pretrained=None, force_quick_gelu=False):  # stands in for the download only
        calls.append((arch, pretrained, force_quick_gelu))
        return create("ViT-B-32", pretrained=None, force_quick_gelu=force_quick_gelu)

    monkeypatch.setattr(open_clip, "create_model", record)
    m = towers.build_clip(TowerConfig(arch="ViT-B-32", pretrained="openai"))
    tag = next(t for t in open_clip.list_pretrained_tags_by_model("ViT-B-32")
               if not open_clip.get_pretrained_cfg("ViT-B-32", t).get("quick_gelu"))
    towers.build_clip(TowerConfig(arch="ViT-B-32", pretrained=tag))
    assert calls == [("ViT-B-32", "openai", True), ("ViT-B-32", tag, False)]
    act = m.visual.transformer.resblocks[0].mlp.gelu
    assert type(act).__name__ == "QuickGELU"  # OpenAI's activation, not open_clip's default GELU


@pytest.mark.parametrize("arch", ["ViT-B-32", "ViT-B-16"])
def test_official_shapes_map_to_the_quickgelu_archs(arch):
    with torch.device("meta"):  # shapes only, no memory
        state = open_clip.CLIP(**open_clip.get_model_config(arch)).state_dict()
    cfg = infer_clip_config(state)
    assert match_open_clip_arch(cfg) == f"{arch}-quickgelu"
    assert TowerConfig(arch=f"{arch}-quickgelu").image_size == 224


@pytest.mark.heavy  # two embedded models (BERT's modelling code): seconds
def test_towers_made_for_weights_that_follow_match_the_read_ones_after_loading():
    """``weights_follow`` makes the embedded text tower from its configuration instead of reading MiniLM: once the
    same weights are loaded, every tensor (non-persistent buffers included) is the same, and torch's generator is
    where reading would have left it (a fresh head drawn after the towers draws the same numbers)."""
    made, states = [], []
    for follow in (False, True):
        torch.manual_seed(3)
        model = RetrievalModel(TowerConfig(), head="xpool", weights_follow=follow)
        states.append(torch.random.get_rng_state())
        made.append(model)
    read, follows = made
    assert torch.equal(*states)
    follows.load_state_dict(read.state_dict(), strict=True)
    ours = dict(follows.named_buffers()) | dict(follows.named_parameters())
    theirs = dict(read.named_buffers()) | dict(read.named_parameters())
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    tokens = read.tokenize(["a dog runs on the beach"])
    assert torch.equal(follows.eval().encode_text(tokens), read.eval().encode_text(tokens))


@pytest.mark.heavy  # ViT-B/32 models: seconds
def test_open_clip_towers_made_for_weights_that_follow_are_neither_initialised_nor_read(tmp_path, monkeypatch):
    """With ``weights_follow`` an open_clip model is made without initialising or reading its weights: once the same
    weights are loaded every tensor (the attention mask buffer included) is the read model's, torch's generator is
    where it was, a tag still chooses QuickGELU (no download asked for), and a weight file that is gone is not
    needed."""
    calls = []
    create = open_clip.create_model

    def record(arch, pretrained=None, force_quick_gelu=False):  # stands in for the download only
        calls.append((arch, pretrained, force_quick_gelu))
        return create(arch, pretrained=None, force_quick_gelu=force_quick_gelu)

    monkeypatch.setattr(open_clip, "create_model", record)
    torch.manual_seed(5)
    read = towers.build_clip(TowerConfig(arch="ViT-B-32", pretrained="openai"))
    state = torch.random.get_rng_state()
    follows = towers.build_clip(TowerConfig(arch="ViT-B-32", pretrained="openai"), weights_follow=True)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert calls == [("ViT-B-32", "openai", True), ("ViT-B-32", None, True)]
    assert type(follows.visual.transformer.resblocks[0].mlp.gelu).__name__ == "QuickGELU"
    follows.load_state_dict(read.state_dict(), strict=True)
    ours = dict(follows.named_buffers()) | dict(follows.named_parameters())
    theirs = dict(read.named_buffers()) | dict(read.named_parameters())
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert torch.nn.init.normal_(torch.zeros(3)).abs().sum() > 0  # torch's initialisers are back
    gone = TowerConfig(arch="ViT-B-32", pretrained=str(tmp_path / "moved-away.pt"), quick_gelu=True)
    assert towers.build_clip(gone, weights_follow=True).visual.proj.shape == read.visual.proj.shape
    with pytest.raises(FileNotFoundError, match="neither an existing weight file"):
        towers.build_clip(gone)
