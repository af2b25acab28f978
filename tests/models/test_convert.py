"""Import of official X-Pool / CLIP4Clip checkpoints (tta.models.convert; hatvtr.md §3).

The "official" models here are written independently of tta: an OpenAI-CLIP ViT in the layout of CLIP4Clip's
``modules/module_clip.py`` (explicit attention arithmetic on ``in_proj_weight``), ``transformers.CLIPModel`` (what
X-Pool instantiates with ``--huggingface``), X-Pool's ``pool_frames`` head and the two official similarity
functions. They are randomly initialised with small widths, saved in the official file formats, converted through
the CLI, loaded through ``model.checkpoint=<path>``, and compared tensor by tensor and output by output.
"""

from __future__ import annotations

import math
from collections import OrderedDict

import pytest
import torch
import torch.nn.functional as F
from omegaconf import OmegaConf
from torch import nn
from transformers import CLIPConfig, CLIPModel

from tta.models.convert import FORMATS, convert_state_dict, main
from tta.models.factory import model_from_config
from tta.utils.config import CONF_DIR

W, EMBED, PATCH, IMG, CTX, VOCAB, LAYERS = 128, 32, 8, 32, 16, 100, 2  # widths 128 -> 2 heads of 64
# the head of model=<format>, the config the converter's "use:" line names
HEAD_TARGETS = {fmt: OmegaConf.load(CONF_DIR / "model" / f"{fmt}.yaml").head._target_ for fmt in FORMATS}


# ------------------------------------------------------------------------- OpenAI CLIP, CLIP4Clip's layout
class QuickGELU(nn.Module):
    def forward(self, x):
        return x * torch.sigmoid(1.702 * x)


class Attention(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.in_proj_weight = nn.Parameter(torch.empty(3 * width, width))
        self.in_proj_bias = nn.Parameter(torch.empty(3 * width))
        self.out_proj = nn.Linear(width, width)
        self.heads = width // 64

    def forward(self, x, causal):  # x: (B, L, W)
        b, length, w = x.shape
        q, k, v = (x @ self.in_proj_weight.t() + self.in_proj_bias).split(w, dim=-1)
        q, k, v = (t.reshape(b, length, self.heads, w // self.heads).transpose(1, 2) for t in (q, k, v))
        logits = q @ k.transpose(-1, -2) / math.sqrt(w // self.heads)
        if causal:
            logits = logits.masked_fill(torch.ones(length, length, dtype=torch.bool).triu(1), float("-inf"))
        out = (logits.softmax(-1) @ v).transpose(1, 2).reshape(b, length, w)
        return self.out_proj(out)


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln_1, self.attn, self.ln_2 = nn.LayerNorm(width), Attention(width), nn.LayerNorm(width)
        self.mlp = nn.Sequential(OrderedDict(c_fc=nn.Linear(width, 4 * width), gelu=QuickGELU(),
                                             c_proj=nn.Linear(4 * width, width)))

    def forward(self, x, causal):
        x = x + self.attn(self.ln_1(x), causal)
        return x + self.mlp(self.ln_2(x))


class Stack(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.resblocks = nn.ModuleList(Block(width) for _ in range(LAYERS))

    def forward(self, x, causal=False):
        for blk in self.resblocks:
            x = blk(x, causal)
        return x


class Visual(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, W, PATCH, PATCH, bias=False)
        self.class_embedding = nn.Parameter(torch.empty(W))
        self.positional_embedding = nn.Parameter(torch.empty((IMG // PATCH) ** 2 + 1, W))
        self.ln_pre, self.transformer, self.ln_post = nn.LayerNorm(W), Stack(W), nn.LayerNorm(W)
        self.proj = nn.Parameter(torch.empty(W, EMBED))

    def forward(self, x):
        x = self.conv1(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.class_embedding.expand(x.shape[0], 1, -1), x], 1) + self.positional_embedding
        x = self.transformer(self.ln_pre(x))
        return self.ln_post(x[:, 0]) @ self.proj


class OpenAICLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.visual, self.transformer = Visual(), Stack(W)
        self.token_embedding = nn.Embedding(VOCAB, W)
        self.positional_embedding = nn.Parameter(torch.empty(CTX, W))
        self.ln_final = nn.LayerNorm(W)
        self.text_projection = nn.Parameter(torch.empty(W, EMBED))
        self.logit_scale = nn.Parameter(torch.tensor(math.log(1 / 0.07)))

    def encode_image(self, x):
        return self.visual(x)

    def encode_text(self, tokens):
        x = self.transformer(self.token_embedding(tokens) + self.positional_embedding, causal=True)
        return self.ln_final(x)[torch.arange(len(tokens)), tokens.argmax(-1)] @ self.text_projection


def hf_clip() -> CLIPModel:
    common = dict(hidden_size=W, intermediate_size=4 * W, num_hidden_layers=LAYERS, num_attention_heads=W // 64,
                  hidden_act="quick_gelu")
    cfg = CLIPConfig(text_config=dict(vocab_size=VOCAB, max_position_embeddings=CTX, eos_token_id=VOCAB - 1,
                                      bos_token_id=VOCAB - 2, pad_token_id=0, **common),
                     vision_config=dict(image_size=IMG, patch_size=PATCH, **common), projection_dim=EMBED)
    return CLIPModel(cfg)


# ------------------------------------------------------------------------------------------ X-Pool's head
class CrossAttn(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.q_proj, self.k_proj, self.v_proj, self.out_proj = (nn.Linear(d, d) for _ in range(4))


class PoolFrames(nn.Module):
    """X-Pool ``modules/transformer.py`` Transformer with one head (the paper's and the code's default)."""

    def __init__(self, d):
        super().__init__()
        self.cross_attn, self.linear_proj = CrossAttn(d), nn.Linear(d, d)
        self.layer_norm1, self.layer_norm2, self.layer_norm3 = nn.LayerNorm(d), nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, text, video):  # (Nt, D), (Nv, T, D) -> (Nv, Nt, D)
        text, video = self.layer_norm1(text), self.layer_norm1(video)
        a = self.cross_attn
        q = a.q_proj(text).t()                                   # (D, Nt)
        logits = a.k_proj(video) @ q / math.sqrt(text.shape[-1])  # (Nv, T, Nt)
        w = logits.softmax(dim=1)
        attn = (a.v_proj(video).transpose(1, 2) @ w).transpose(1, 2)  # (Nv, Nt, D)
        out = self.layer_norm2(a.out_proj(attn))
        return self.layer_norm3(out + self.linear_proj(out))


class Official(nn.Module):
    def __init__(self, layout, fmt):
        super().__init__()
        self.layout, self.fmt = layout, fmt
        self.clip = OpenAICLIP() if layout == "openai" else hf_clip()
        if fmt == "xpool":
            self.pool_frames = PoolFrames(EMBED)
        g = torch.Generator().manual_seed(7)
        with torch.no_grad():  # distinct random values everywhere, so every tensor is identifiable
            for name, p in self.named_parameters():
                base = 1.0 if name.endswith("weight") and p.dim() == 1 else 0.0
                p.copy_(base + 0.05 * torch.randn(p.shape, generator=g))

    def text(self, tokens):
        if self.layout == "openai":
            return self.clip.encode_text(tokens)
        mask = (torch.arange(tokens.shape[1]) <= tokens.argmax(-1, keepdim=True)).long()
        out = self.clip.get_text_features(input_ids=tokens, attention_mask=mask)
        return out if torch.is_tensor(out) else out.pooler_output

    def frames(self, video):  # (B, T, 3, H, W) -> (B, T, D)
        flat = video.flatten(0, 1)
        out = self.clip.encode_image(flat) if self.layout == "openai" else self.clip.get_image_features(flat)
        out = out if torch.is_tensor(out) else out.pooler_output
        return out.reshape(video.shape[0], video.shape[1], -1)

    def sims(self, text, frames):  # -> (Nt, Nv), no temperature
        t = text / text.norm(dim=-1, keepdim=True)
        if self.fmt == "clip4clip":  # CLIP4Clip _loose_similarity, meanP, all frames valid
            v = frames / frames.norm(dim=-1, keepdim=True)
            v = v.mean(1)
            return t @ (v / v.norm(dim=-1, keepdim=True)).t()
        pooled = self.pool_frames(text, frames)  # X-Pool sim_matrix_training
        pooled = pooled / pooled.norm(dim=-1, keepdim=True)
        return torch.bmm(t.unsqueeze(1), pooled.permute(1, 2, 0)).squeeze(1)


def tokens(n=5):
    g = torch.Generator().manual_seed(3)
    out = torch.zeros(n, CTX, dtype=torch.long)
    for i in range(n):
        length = 3 + i * 2
        out[i, 0] = VOCAB - 2
        out[i, 1:length] = torch.randint(1, VOCAB - 2, (length - 1,), generator=g)
        out[i, length] = VOCAB - 1
    return out


def save_official(model, path, legacy_buffers):
    state = model.state_dict()
    if legacy_buffers:  # transformers 4.6 (X-Pool's version) saved these buffers
        state["clip.text_model.embeddings.position_ids"] = torch.arange(CTX)[None]
        state["clip.vision_model.embeddings.position_ids"] = torch.arange((IMG // PATCH) ** 2 + 1)[None]
    blob = {"epoch": 3, "state_dict": state, "optimizer": {"state": {}, "param_groups": [{"lr": 1e-5}]}} \
        if model.fmt == "xpool" else state
    torch.save(blob, path)
    return state


def lands(official: dict, ours: dict) -> None:
    """Every official tensor appears in our state dict (as is, transposed, or as one third of an in_proj) and
    every one of our tensors is made of official ones. Values are random, so equality identifies a tensor."""
    ours_t = list(ours.values())

    def found(t):
        for o in ours_t:
            if o.shape == t.shape and torch.equal(o, t):
                return True
            if o.dim() == 2 and o.t().shape == t.shape and torch.equal(o.t(), t):
                return True
            if t.dim() and o.dim() and o.shape == (3 * t.shape[0], *t.shape[1:]) \
                    and any(torch.equal(c, t) for c in o.chunk(3)):
                return True
        return False

    lost = [k for k, t in official.items() if not k.endswith("position_ids") and not found(t)]
    assert not lost, f"official tensors not in the converted model: {lost[:5]}"
    off_t = [t for k, t in official.items() if not k.endswith("position_ids")]
    unfilled = [k for k, o in ours.items()
                if not any(torch.equal(o, t) or (o.dim() == 2 and o.t().shape == t.shape and torch.equal(o.t(), t))
                           for t in off_t if t.numel() == o.numel())
                and not (o.dim() and o.shape[0] % 3 == 0 and all(any(torch.equal(c, t) for t in off_t if t.shape == c.shape)
                                                     for c in o.chunk(3)))]
    assert not unfilled, f"converted tensors not from the official file: {unfilled[:5]}"


@pytest.mark.parametrize("layout", ["openai", "huggingface"])
@pytest.mark.parametrize("fmt", ["clip4clip", "xpool"])
def test_convert_official_checkpoint(tmp_path, capsys, layout, fmt):
    official = Official(layout, fmt).eval()
    src, dst = tmp_path / "official.pth", tmp_path / "converted.pt"
    state = save_official(official, src, legacy_buffers=layout == "huggingface")
    assert main(["--format", fmt, str(src), str(dst)]) == 0
    out = capsys.readouterr().out
    assert f"(CLIP layout: {layout}) -> tta arch custom" in out and "UNMAPPED" not in out and "MISSING" not in out
    assert f"{2 if layout == 'huggingface' else 0} buffers ignored" in out

    cfg = OmegaConf.create({"name": fmt, "head": {"_target_": HEAD_TARGETS[fmt]}, "arch": "custom", "pretrained": None,
                            "embed_dim": EMBED, "context_length": CTX})
    model = model_from_config(cfg, checkpoint=str(dst))  # the model.checkpoint=<path> route
    assert model.head_name == FORMATS[fmt] and not model.training
    assert f"{len(model.state_dict())} tensors mapped" in out  # one row per tta tensor
    lands(state, model.state_dict())

    video = torch.randn(3, 4, 3, IMG, IMG, generator=torch.Generator().manual_seed(5))
    tok = tokens()
    with torch.no_grad():
        ref_frames, ref_text = official.frames(video), official.text(tok)
        frames, text = model.encode_video(video), model.encode_text(tok)
        assert torch.allclose(frames, ref_frames, atol=1e-5), (frames - ref_frames).abs().max()
        assert torch.allclose(text, ref_text, atol=1e-5), (text - ref_text).abs().max()
        ref = official.sims(ref_text, ref_frames)
        assert ref.shape == (5, 3) and ref.std() > 1e-3  # not a degenerate comparison
        assert torch.allclose(model.similarity(text, frames), ref, atol=1e-5)      # t2v
        assert torch.allclose(model.similarity(frames, text), ref.t(), atol=1e-5)  # v2t


def test_unmapped_and_missing_keys_are_reported(tmp_path, capsys):
    official = Official("openai", "clip4clip")
    state = dict(official.state_dict())
    state["clip4clip_extra"] = torch.zeros(1)
    state["cross.embeddings.word_embeddings.weight"] = torch.zeros(4, 4)   # CLIP4Clip without --loose_type
    state["similarity_dense.weight"] = torch.zeros(1, W)
    torch.save(state, tmp_path / "pytorch_model.bin.4")
    assert main(["--format", "clip4clip", str(tmp_path / "pytorch_model.bin.4"), str(tmp_path / "o.pt")]) == 1
    err = capsys.readouterr().err
    assert "UNMAPPED official keys (3)" in err and "--loose_type" in err and "clip4clip_extra" in err
    assert not (tmp_path / "o.pt").exists()
    assert main(["--format", "clip4clip", "--allow-unmapped", str(tmp_path / "pytorch_model.bin.4"),
                 str(tmp_path / "o.pt")]) == 0
    assert (tmp_path / "o.pt").exists()

    xpool = Official("huggingface", "xpool").state_dict()
    _, report = convert_state_dict(xpool, "xpool")
    assert report.ok and report.clip_layout == "huggingface"
    with pytest.raises(ValueError, match=r"(?s)UNMAPPED official keys \(16\).*pool_frames.*--format xpool"):
        convert_state_dict(xpool, "clip4clip")
    no_head = {k: v for k, v in xpool.items() if not k.startswith("pool_frames.")}
    with pytest.raises(ValueError, match=r"(?s)MISSING tta keys \(16\).*pool\.layer_norm1\.bias"):
        convert_state_dict(no_head, "xpool")
    with pytest.raises(ValueError, match="no CLIP weights found"):
        convert_state_dict({"pool_frames.linear_proj.weight": torch.zeros(2, 2)}, "xpool")
    with pytest.raises(ValueError, match="unknown format"):
        convert_state_dict(xpool, "frozen")


@pytest.mark.slow
def test_full_size_xpool_vit_b32_huggingface(tmp_path):
    """The published X-Pool layout at full size: transformers' default CLIPConfig is openai/clip-vit-base-patch32."""
    torch.manual_seed(0)
    clip = CLIPModel(CLIPConfig()).eval()
    pool = PoolFrames(512)
    with torch.no_grad():
        for p in pool.parameters():
            p.add_(0.05 * torch.randn_like(p))
    state = {**{"clip." + k: v for k, v in clip.state_dict().items()},
             **{"pool_frames." + k: v for k, v in pool.state_dict().items()}}
    torch.save({"epoch": 5, "state_dict": state}, tmp_path / "model_best.pth")
    assert main(["--format", "xpool", str(tmp_path / "model_best.pth"), str(tmp_path / "x.pt")]) == 0
    cfg = OmegaConf.create({"name": "xpool", "head": {"_target_": HEAD_TARGETS["xpool"]}, "arch": "ViT-B-32-quickgelu", "pretrained": None,
                            "embed_dim": 512, "context_length": 77})
    model = model_from_config(cfg, checkpoint=str(tmp_path / "x.pt"))
    tok = model.tokenize(["a man is cooking pasta", "two dogs play in the snow", "someone plays a guitar"])
    video = torch.randn(2, 2, 3, 224, 224)
    with torch.no_grad():
        mask = (torch.arange(tok.shape[1]) <= tok.argmax(-1, keepdim=True)).long()
        ref_t = clip.get_text_features(input_ids=tok, attention_mask=mask)
        ref_t = ref_t if torch.is_tensor(ref_t) else ref_t.pooler_output
        ref_v = clip.get_image_features(video.flatten(0, 1))
        ref_v = (ref_v if torch.is_tensor(ref_v) else ref_v.pooler_output).reshape(2, 2, -1)
        text, frames = model.encode_text(tok), model.encode_video(video)
        assert torch.allclose(text, ref_t, atol=1e-4) and torch.allclose(frames, ref_v, atol=1e-4)
        pooled = pool(ref_t, ref_v)
        ref = torch.einsum("td,vtd->tv", F.normalize(ref_t, dim=-1), F.normalize(pooled, dim=-1))
        assert torch.allclose(model.similarity(text, frames), ref, atol=1e-4)


# ------------------------------------------------------------------------------------- CLIP4Clip seqTransf
SEQ_POSITIONS, SEQ_LAYERS = 77, 4  # CLIP's context length and --cross_num_hidden_layers, CLIP4Clip's defaults


class TFLayerNorm(nn.Module):
    """The LayerNorm of CLIP4Clip's until_module (epsilon inside the square root, 1e-12)."""

    def __init__(self, d):
        super().__init__()
        self.weight, self.bias = nn.Parameter(torch.ones(d)), nn.Parameter(torch.zeros(d))

    def forward(self, x):
        u = x.mean(-1, keepdim=True)
        s = (x - u).pow(2).mean(-1, keepdim=True)
        return self.weight * (x - u) / torch.sqrt(s + 1e-12) + self.bias


class CrossBlock(nn.Module):
    """module_cross.ResidualAttentionBlock: sequence-first attention with an additive (all-zero) frame mask."""

    def __init__(self, d, heads):
        super().__init__()
        self.attn, self.ln_1, self.ln_2, self.n_head = nn.MultiheadAttention(d, heads), TFLayerNorm(d), TFLayerNorm(d), heads
        self.mlp = nn.Sequential(OrderedDict([("c_fc", nn.Linear(d, 4 * d)), ("gelu", QuickGELU()),
                                              ("c_proj", nn.Linear(4 * d, d))]))

    def forward(self, x, mask):  # x: (L, N, D); mask: (N, L, L)
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, need_weights=False, attn_mask=mask.repeat(self.n_head, 1, 1))[0]
        return x + self.mlp(self.ln_2(x))


class OfficialSeqTransf(Official):
    """CLIP4Clip trained with --loose_type --sim_header seqTransf: frame_position_embeddings and transformerClip.

    In the released CLIPs the text width equals the embedding width, so the temporal transformer has width D and
    D // 64 heads; here D = EMBED = 32 (one head)."""

    def __init__(self):
        super().__init__("openai", "clip4clip")
        self.frame_position_embeddings = nn.Embedding(SEQ_POSITIONS, EMBED)
        self.transformerClip = nn.Module()
        self.transformerClip.resblocks = nn.ModuleList(CrossBlock(EMBED, max(1, EMBED // 64)) for _ in range(SEQ_LAYERS))
        g = torch.Generator().manual_seed(11)
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.startswith(("frame_position", "transformerClip")):
                    base = 1.0 if name.endswith("weight") and p.dim() == 1 else 0.0
                    p.copy_(base + 0.05 * torch.randn(p.shape, generator=g))

    def sims(self, text, frames):  # CLIP4Clip _loose_similarity with sim_header seqTransf, all frames valid
        n, t, _ = frames.shape
        original = frames
        x = frames + self.frame_position_embeddings(torch.arange(t).unsqueeze(0).expand(n, -1))
        mask = torch.zeros(n, t, t)  # (1 - video_mask) * -1e6 with every frame valid
        x = x.permute(1, 0, 2)
        for block in self.transformerClip.resblocks:
            x = block(x, mask)
        v = x.permute(1, 0, 2) + original
        v = v / v.norm(dim=-1, keepdim=True)
        v = v.mean(1)
        v = v / v.norm(dim=-1, keepdim=True)
        t_ = text / text.norm(dim=-1, keepdim=True)
        return t_ @ v.t()


def test_convert_official_seqtransf_checkpoint(tmp_path, capsys):
    official = OfficialSeqTransf().eval()
    src, dst = tmp_path / "pytorch_model.bin.4", tmp_path / "converted.pt"
    state = save_official(official, src, legacy_buffers=False)
    assert any(k.startswith("transformerClip.resblocks.3.") for k in state)
    assert main(["--format", "clip4clip", str(src), str(dst)]) == 0
    out = capsys.readouterr().out
    assert "head seqtransf" in out and "UNMAPPED" not in out and "MISSING" not in out
    assert "use: model=clip4clip_seqtransf " in out
    cfg = OmegaConf.create({"name": "clip4clip_seqtransf", "head": {"_target_": "tta.models.heads.SeqTransfHead"},
                            "arch": "custom", "pretrained": None, "embed_dim": EMBED, "context_length": CTX})
    model = model_from_config(cfg, checkpoint=str(dst))
    assert model.head_name == "seqtransf"
    ours = model.state_dict()
    assert torch.equal(ours["pool.frame_position_embeddings.weight"], state["frame_position_embeddings.weight"])
    assert torch.equal(ours["pool.transformer.resblocks.2.attn.in_proj_weight"],
                       state["transformerClip.resblocks.2.attn.in_proj_weight"])
    lands(state, ours)

    video = torch.randn(3, 6, 3, IMG, IMG, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        frames, text = model.encode_video(video), model.encode_text(tokens())
        ref = official.sims(text, frames)
        assert ref.shape == (5, 3) and ref.std() > 1e-3
        assert torch.allclose(model.similarity(text, frames), ref, atol=1e-5)      # t2v
        assert torch.allclose(model.similarity(frames, text), ref.t(), atol=1e-5)  # v2t
        reversed_ref = official.sims(text, frames.flip(1))
        assert not torch.allclose(reversed_ref, ref, atol=1e-4)  # the official head is order-sensitive too
        assert torch.allclose(model.similarity(text, frames.flip(1)), reversed_ref, atol=1e-5)


def test_seqlstm_and_other_depths_stay_refused():
    state = dict(OfficialSeqTransf().state_dict())
    lstm = {k: v for k, v in state.items() if not k.startswith("transformerClip.")}
    lstm["lstm_visual.weight_ih_l0"] = torch.zeros(4 * EMBED, EMBED)
    with pytest.raises(ValueError, match=r"(?s)UNMAPPED official keys \(2\).*seqLSTM"):
        convert_state_dict(lstm, "clip4clip")
    shallow = {k: v for k, v in state.items() if not k.startswith(("transformerClip.resblocks.2.",
                                                                     "transformerClip.resblocks.3."))}
    with pytest.raises(ValueError, match="has 2 temporal transformer layers"):
        convert_state_dict(shallow, "clip4clip")
