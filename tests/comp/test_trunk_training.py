"""CompLoss with a trainable text trunk: which weights train, the one-line refusals, and the unchanged recipe keys."""

from __future__ import annotations

import copy
from pathlib import Path

import lightning as L
import pytest
import torch
from omegaconf import OmegaConf
from torch.utils.data import DataLoader

from tests.conftest import tiny_overrides
from tests.fixtures import TINY_CLIP_CFG, TINY_FRAMES, TINY_SIZE
from tta.models.retrieval import RetrievalModel
from tta.models.towers import CUSTOM, TowerConfig
from tta.synth.zoo import _recipe_key, _train_cfg
from tta.train import ClipSet, CompTerm, ContrastiveModule, _freeze_for_training
from tta.utils.config import compose
from tta.utils.config_rules import CHAIN_NEGATIVES, ConfigValueError, validate_config

CAPTIONS = ["a red square moves right, then rises", "a blue circle moves up, then falls",
            "a green square moves left, then spins", "a yellow circle moves down, then stops"]


def two_block_model() -> RetrievalModel:
    torch.manual_seed(0)
    cfg = copy.deepcopy(TINY_CLIP_CFG)
    cfg["text_cfg"]["layers"] = 2
    return RetrievalModel(TowerConfig(arch=CUSTOM, clip_cfg=cfg, context_length=16), head="seqtransf")


def chains() -> list[tuple[str, ...]]:
    """(positive, reorder, action replaced) for each caption: the positive is the caption itself."""
    out = []
    for c in CAPTIONS:
        first, second = c.split(", then ")
        subject, verb = first.split(" moves ")
        out.append((c, f"{subject} {second}, then moves {verb}", c.replace("moves", "jumps")))
    return out


def fit(model: RetrievalModel, trainable_layers: int, text_trunk_lr: float | None) -> None:
    _freeze_for_training(model, True, trainable_layers)
    clips = [torch.randn(TINY_FRAMES, 3, TINY_SIZE, TINY_SIZE).half() for _ in CAPTIONS]
    comp = CompTerm(chains(), weight=1.0, tau=0.05, opens_with_captions=True)
    module = ContrastiveModule(model, None, model.tokenize(CAPTIONS), lr=1e-2, weight_decay=0.1, warmup=1, steps=2,
                               freeze_text_trunk=True, comp=comp, text_trunk_lr=text_trunk_lr)
    loader = DataLoader(ClipSet(clips, [[i] for i in range(len(CAPTIONS))], TINY_FRAMES, seed=0), batch_size=4)
    trainer = L.Trainer(max_steps=2, accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                        enable_model_summary=False, enable_progress_bar=False)
    trainer.fit(module, loader)


@pytest.mark.parametrize("text_trunk_lr", [None, 1e-3])
def test_comploss_trains_the_top_trunk_block_and_nothing_else_of_the_trunk(text_trunk_lr):
    model = two_block_model()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    top = {id(p) for p in model.text_trunk_top_parameters(1)}
    head = {id(p) for p in model.text_head_parameters()}
    fit(model, 1, text_trunk_lr)
    changed = {n.removeprefix("clip.") for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    ids = {id(p) for p in model.text_trunk_parameters()}
    trunk = [(n.removeprefix("clip."), p) for n, p in model.named_parameters() if id(p) in ids]
    assert not ids & head
    assert {n for n, p in trunk if id(p) in top} <= changed, "every parameter of the top block trains"
    assert "transformer.resblocks.1.ln_1.weight" in changed and "ln_final.weight" in changed
    frozen = {n for n, p in trunk if id(p) not in top}
    assert frozen and not frozen & changed, f"frozen trunk parameters moved: {sorted(frozen & changed)}"
    assert "transformer.resblocks.0.attn.in_proj_weight" in frozen and "token_embedding.weight" in frozen
    assert "text_projection" in changed and any(n.startswith("visual.") for n in changed)
    assert any(n.startswith("pool.") for n in changed)  # the seqTransf head


def test_the_optimizer_gives_the_trunk_its_own_learning_rate():
    model = two_block_model()
    _freeze_for_training(model, True, 1)
    module = ContrastiveModule(model, None, model.tokenize(CAPTIONS), lr=1e-3, weight_decay=0.1, warmup=1, steps=2,
                               freeze_text_trunk=True, text_trunk_lr=1e-5)
    opt = module.configure_optimizers()["optimizer"]
    top = {id(p) for p in model.text_trunk_top_parameters(1)}
    for group in opt.param_groups:
        ids = {id(p) for p in group["params"]}
        assert ids <= top or not ids & top
        assert group["lr"] == (1e-5 if ids <= top else 1e-3)
    trainable = {id(p) for p in model.parameters() if p.requires_grad}
    assert {id(p) for g in opt.param_groups for p in g["params"]} == trainable


def test_chain_embeddings_reuse_the_caption_embeddings():
    model = two_block_model().eval()
    comp = CompTerm(chains(), weight=1.0, tau=0.05)
    idx = torch.tensor([2, 0])
    with torch.no_grad():
        full = comp.chain_embeddings(model, idx, torch.device("cpu"))
        captions = model.encode_text(model.tokenize([CAPTIONS[2], CAPTIONS[0]]))
        reused = comp.chain_embeddings(model, idx, torch.device("cpu"), positive=captions)
    assert full.shape == (2, 3, 32)
    assert torch.allclose(full, reused, atol=1e-5)


def test_reversed_video_pair_costs_log2_for_an_order_free_head_and_trains_seqtransf_positions():
    import math

    from tests.fixtures import tiny_model

    video = torch.randn(2, TINY_FRAMES, 32)
    idx = torch.tensor([0, 1])
    meanp = tiny_model("meanp")
    with torch.no_grad():
        plain = CompTerm(chains(), 1.0, 0.05).loss(meanp, video, idx)
        both = CompTerm(chains(), 1.0, 0.05, reversed_video=True).loss(meanp, video, idx)
    assert float(both - plain) == pytest.approx(math.log(2), abs=1e-5)  # mean pooling: backwards scores the same
    seq = tiny_model("seqtransf")
    CompTerm(chains(), 1.0, 0.05, reversed_video=True).loss(seq, video, idx).backward()
    assert seq.pool.frame_position_embeddings.weight.grad.abs().sum() > 0


def test_too_many_trainable_blocks_is_one_line():
    with pytest.raises(ValueError, match="text_trunk_trainable_layers=3: this text trunk has 2 blocks"):
        two_block_model().text_trunk_top_parameters(3)


@pytest.mark.parametrize("overrides,message", [
    (["text_trunk_trainable_layers=2", "freeze_text_trunk=false"], "the whole trunk trains already"),
    (["text_trunk_lr=1e-4"], "text_trunk_lr=0.0001 with a frozen text trunk"),
    (["text_trunk_trainable_layers=-1"], "text_trunk_trainable_layers=-1"),
    (["text_trunk_trainable_layers=1", "text_trunk_lr=-1"], "text_trunk_lr=-1"),
    (["comp_loss.chain=[temp_reorder,shuffle]"], "comp_loss.chain="),
    (["comp_loss.chain=[]"], "comp_loss.chain="),
])
def test_invalid_trunk_and_chain_options_are_one_line(overrides, message):
    with pytest.raises(ConfigValueError, match=message) as info:
        validate_config(compose("train", overrides))
    assert "\n" not in str(info.value)


def test_valid_trunk_options_pass():
    validate_config(compose("train", ["text_trunk_trainable_layers=2", "text_trunk_lr=1e-4", "comp_loss.weight=1",
                                      "comp_loss.chain=[temp_reorder,reorder_replaced]"]))
    validate_config(compose("train", ["freeze_text_trunk=false", "text_trunk_lr=1e-4", "comp_loss.weight=1"]))


def test_chain_names_match_the_training_chains():
    from tta.comp.training import CHAIN, NEGATIVES

    assert tuple(NEGATIVES) == CHAIN_NEGATIVES and CHAIN[1:] == CHAIN_NEGATIVES
    assert list(compose("train", []).comp_loss.chain) == list(CHAIN[1:])


def test_new_options_at_their_defaults_keep_the_recipe_keys():
    run = compose("run", ["model=clip4clip_seqtransf", "data=synth_comp"])

    def key(*recipe: str, stage: str = "finetune") -> str:
        return _recipe_key(_train_cfg(stage, run.model, run.data if stage == "finetune" else None, Path("/c"),
                                      list(recipe)))

    # the published seqTransf checkpoints (docs/results/videocomp-probe.md): InfoNCE, CompLoss λ = 1 and λ = 10
    assert key() == "84fa192006"
    assert key("comp_loss.weight=1") == "62ae5bc9c3"
    assert key("comp_loss.weight=10", "steps=300") == "e744f25a55"
    assert key("comp_loss.weight=1", "text_trunk_trainable_layers=0", "text_trunk_lr=null",
               "comp_loss.chain=[temp_reorder,action_replace,reorder_replaced]") == "62ae5bc9c3"
    assert key("comp_loss.weight=1", "text_trunk_trainable_layers=2") != "62ae5bc9c3"
    assert key("comp_loss.weight=1", "comp_loss.chain=[temp_reorder]") != "62ae5bc9c3"
    assert key("comp_loss.weight=1", "comp_loss.reversed_video=false") == "62ae5bc9c3"
    assert key("comp_loss.weight=1", "comp_loss.reversed_video=true") != "62ae5bc9c3"
    # recoloured events (docs/results/videocomp-probe.md) train their own; the motion-only checkpoints keep their keys
    recoloured = compose("run", ["model=clip4clip_seqtransf", "data=synth_comp", "data.synth.recolour_events=true"])
    assert _recipe_key(_train_cfg("finetune", recoloured.model, recoloured.data, Path("/c"),
                                  ["comp_loss.weight=1"])) == "af3bb32973"
    # fine-tuning options: a recipe with them starts from the shared pretrained model
    pretrained = key(stage="pretrain")
    assert key("text_trunk_trainable_layers=2", "text_trunk_lr=1e-4", stage="pretrain") == pretrained
    cfg = _train_cfg("pretrain", run.model, None, Path("/c"), ["text_trunk_trainable_layers=2"])
    assert cfg.text_trunk_trainable_layers == 0 and OmegaConf.select(cfg, "text_trunk_lr") is None


def test_a_trainable_trunk_comploss_recipe_end_to_end(tiny_cache, tmp_path):
    """The embedded MiniLM trunk: its top block trains, the blocks below it and the embeddings do not."""
    from tests.comp.test_comp_runs import TINY_RECIPE
    from tta.run import run

    recipe = (*TINY_RECIPE, "comp_loss.weight=1", "text_trunk_trainable_layers=1", "text_trunk_lr=1e-3")
    line = "embedded_recipe=[" + ",".join(f"'{r}'" for r in recipe) + "]"
    record = run(compose("run", tiny_overrides(tiny_cache, "task=comp", "data=synth_comp", line)), tmp_path)
    assert record["comp"]["source"]["n_videos"] > 0
    tuned = [p for p in sorted(tiny_cache.glob("checkpoints/clip4clip-synth_comp-*.pt"))
             if torch.load(p, weights_only=False)["train_config"].get("text_trunk_trainable_layers") == 1]
    assert len(tuned) == 1
    init = torch.load(torch.load(tuned[0], weights_only=False)["train_config"]["init"], weights_only=False)
    after = torch.load(tuned[0], weights_only=False)["state_dict"]
    before = init["state_dict"]
    trunk = [k for k in after if k.startswith("clip.text.transformer.")]
    moved = {k for k in trunk if not torch.equal(after[k], before[k])}
    top = {k for k in trunk if k.startswith("clip.text.transformer.encoder.layer.5.")}
    assert top and moved == top, sorted(moved ^ top)[:5]


def test_an_invalid_recipe_stops_the_run_with_one_line(tiny_cache, tmp_path):
    from tests.comp.test_comp_runs import TINY_RECIPE
    from tta.run import run
    from tta.utils.cli import user_error_line

    recipe = (*TINY_RECIPE, "comp_loss.weight=1", "text_trunk_trainable_layers=1", "freeze_text_trunk=false")
    line = "embedded_recipe=[" + ",".join(f"'{r}'" for r in recipe) + "]"
    with pytest.raises(ConfigValueError) as info:
        run(compose("run", tiny_overrides(tiny_cache, "task=comp", "data=synth_comp", line)), tmp_path)
    message = user_error_line(info.value)
    assert message is not None and "\n" not in message and "freeze_text_trunk=false" in message
