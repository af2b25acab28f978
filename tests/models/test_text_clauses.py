"""Clause-sequence pooling of captions (``model.text_pool=clauses``, tta/models/text_clauses.py): clauses are the
means of their content tokens, order enters only through the clause positions, padding changes nothing, the
embedded model encodes through it, checkpoints keep it, and the default models' checkpoint keys stay as they were."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import torch

from tests.fixtures import tiny_tower_config
from tta.models.text_clauses import TEXT_POOLS, ClauseSequencePool
from tta.utils.config_rules import TEXT_POOLS as RULE_POOLS
from tta.utils.config_rules import ConfigValueError, validate_config

pytestmark = pytest.mark.usefixtures("single_thread_torch")
D = 16
COMMA, PERIOD, PAD, CLS, SEP = 1010, 1012, 0, 101, 102


def pool(seed: int = 0) -> ClauseSequencePool:
    torch.manual_seed(seed)
    return ClauseSequencePool(D, [COMMA, PERIOD], [PAD, CLS, SEP]).eval()


def test_clauses_are_the_means_of_their_content_tokens():
    p = pool()
    tokens = torch.tensor([[CLS, 5, 6, COMMA, 7, 8, 9, PERIOD, SEP, PAD],   # two clauses, a trailing period
                           [CLS, 5, COMMA, COMMA, 7, SEP, PAD, PAD, PAD, PAD]])  # an empty clause in the middle
    states = torch.randn(2, 10, D)
    c = p.clauses(states, tokens)
    assert c.shape == (2, ClauseSequencePool.MAX_CLAUSES, D)
    assert torch.allclose(c[0, 0], states[0, 1:3].mean(0)) and torch.allclose(c[0, 1], states[0, 4:7].mean(0))
    assert torch.allclose(c[1, 0], states[1, 1]) and torch.allclose(c[1, 1], states[1, 4])  # moved up, in order
    assert (c[:, 2:] == 0).all()  # no slot for the empty clauses, the padding, [CLS] or [SEP]


def test_clauses_past_the_last_slot_merge_into_it():
    p = pool()
    n = ClauseSequencePool.MAX_CLAUSES + 2
    ids = [CLS] + [t for k in range(n) for t in (10 + k, COMMA)][:-1] + [SEP]
    tokens = torch.tensor([ids])
    states = torch.randn(1, len(ids), D)
    c = p.clauses(states, tokens)
    content = [i for i, t in enumerate(ids) if 10 <= t < 10 + n]
    assert torch.allclose(c[0, 0], states[0, content[0]])
    assert torch.allclose(c[0, -1], states[0, content[-3:]].mean(0))  # the last slot holds the last three clauses


def test_order_enters_through_the_clause_positions_only():
    p = pool()
    with torch.no_grad():  # larger weights than the initialisation, so that the transformer matters
        for w in p.transformer.parameters():
            if w.dim() > 1:
                w.normal_(0.0, 0.3)
    clauses = torch.randn(3, 4, D)
    reordered = clauses[:, [2, 0, 3, 1]]
    assert (p(clauses) - p(reordered)).abs().max() > 1e-3
    with torch.no_grad():
        p.clause_position_embeddings.weight.zero_()
    assert torch.allclose(p(clauses), p(reordered), atol=1e-5)  # without positions: a set, not a sequence


def test_padding_rows_change_nothing():
    p = pool()
    with torch.no_grad():
        for w in p.transformer.parameters():
            if w.dim() > 1:
                w.normal_(0.0, 0.3)
    clauses = torch.randn(2, 3, D)
    padded = torch.cat([clauses, torch.zeros(2, 5, D)], 1)
    assert torch.allclose(p(clauses), p(padded), atol=1e-5)
    assert torch.isfinite(p(torch.zeros(1, 8, D))).all()  # an empty caption: one zero clause, no NaN


def test_text_pool_is_checked_in_one_line():
    assert tuple(TEXT_POOLS) == RULE_POOLS
    with pytest.raises(ConfigValueError, match="model.text_pool=words: expected one of mean, clauses"):
        validate_config({"model": {"text_pool": "words"}})
    with pytest.raises(ConfigValueError, match="model.arch=ViT-B-32 has only its end-of-text feature"):
        validate_config({"model": {"text_pool": "clauses", "arch": "ViT-B-32"}})
    validate_config({"model": {"text_pool": "clauses", "arch": "embedded"}})
    from tta.models.retrieval import RetrievalModel

    with pytest.raises(ValueError, match="use model.text_pool=mean"):
        RetrievalModel(tiny_tower_config(), text_pool="clauses")


def _names(overrides: list[str]) -> tuple[str, str]:
    from tta.synth.zoo import _recipe_key, _train_cfg
    from tta.utils.config import compose

    cfg = compose("run", overrides)
    cache = Path("/nonexistent-cache")
    pre = f"pretrained-{_recipe_key(_train_cfg('pretrain', cfg.model, None, cache))}.pt"
    ft = _train_cfg("finetune", cfg.model, cfg.data, cache)
    ft.init = str(cache / "checkpoints" / pre)
    return pre, _recipe_key(ft) + hashlib.sha256(pre.encode()).hexdigest()[:4]


def test_clause_pooling_has_its_own_checkpoint_from_the_shared_pretrained_model():
    base = ["model=clip4clip_seqtransf", "data=synth_comp"]
    pre, mean = _names(base)
    pre_c, clauses = _names([*base, "model.text_pool=clauses"])
    assert pre == pre_c == "pretrained-e78eba8cbe.pt" and mean != clauses


@pytest.mark.heavy  # builds the embedded model (the MiniLM trunk) and writes two checkpoints
def test_embedded_model_encodes_through_the_clauses_and_checkpoints_keep_them(tmp_path):
    from tta.models.checkpoint import load_checkpoint, save_checkpoint
    from tta.models.retrieval import RetrievalModel
    from tta.models.towers import TowerConfig

    torch.manual_seed(0)
    model = RetrievalModel(TowerConfig(), head="seqtransf", text_pool="clauses").eval()
    with torch.no_grad():
        for w in model.text_clauses.transformer.parameters():
            if w.dim() > 1:
                w.normal_(0.0, 0.3)
    texts = ["a ball on grass turns red and rises, then becomes blue and falls, finally turns green and bounces.",
             "a ball on grass becomes blue and falls, then turns red and rises, finally turns green and bounces.",
             "a man is singing"]
    tokens = model.tokenize(texts)
    with torch.no_grad():
        trunk = model.text_trunk(tokens)
        emb = model.encode_text(tokens)
    assert trunk.shape == (3, ClauseSequencePool.MAX_CLAUSES, 384)
    assert ((trunk.abs().sum(-1) > 0).sum(1) == torch.tensor([3, 3, 1])).all()
    assert torch.allclose(emb, model.text_head(trunk), rtol=1e-4, atol=1e-4) and emb.shape == (3, 256)
    assert 1 - torch.nn.functional.cosine_similarity(emb[0], emb[1], dim=0) > 1e-3
    clause_lns = {id(m) for m in model.text_clauses.modules() if isinstance(m, torch.nn.LayerNorm)}
    assert clause_lns <= {id(ln) for _, ln in model.layer_norms("text")}
    assert not clause_lns & {id(ln) for _, ln in model.layer_norms("video")}
    assert model.config()["text_pool"] == "clauses"

    save_checkpoint(tmp_path / "clauses.pt", model)
    again = load_checkpoint(tmp_path / "clauses.pt")
    with torch.no_grad():
        assert torch.equal(again.encode_text(tokens), emb)
    mean = RetrievalModel(TowerConfig(), head="seqtransf").eval()
    assert "text_pool" not in mean.config()
    save_checkpoint(tmp_path / "mean.pt", mean)
    grown = load_checkpoint(tmp_path / "mean.pt", text_pool="clauses")  # fine-tuning from the pretrained model
    assert grown.text_clauses is not None
    assert torch.equal(grown.clip.text.proj.weight, mean.clip.text.proj.weight)
    with pytest.raises(ValueError, match="set model.text_pool=clauses to load it"):  # never drop trained weights
        load_checkpoint(tmp_path / "clauses.pt", text_pool="mean")
