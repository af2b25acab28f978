"""The adapter contract (ARCHITECTURE.md "Habits") on the in-memory tiny model, for every conf/adapter/*.yaml and
both heads and directions - the fast-tier twin of tests/adapters/test_adapter_contract.py (which runs on the rendered
benchmark):

* only the query encoder's LayerNorm weights and biases may move (nothing for gradient-free methods);
* the scores are finite and one row per query over the whole gallery;
* ``reset()`` restores the parameters and the optimizer state bit-exactly: the first batch after a reset scores the
  same bit for bit;
* ``source`` scores the frozen model's similarity.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest
import torch

from tests.fixtures import assert_contract_after_stream, build_fast_env, make_fast_adapter, state_copy, stream
from tta.utils.config import CONF_DIR

pytestmark = pytest.mark.usefixtures("single_thread_torch")

ADAPTERS = sorted(p.stem for p in (Path(CONF_DIR) / "adapter").glob("*.yaml"))
UNTOUCHED = {"source", "hsm", "dsl", "qbnorm"}  # gradient-free whatever their config


ENVS = [("meanp", "v2t"), ("xpool", "v2t"), ("meanp", "t2v"), ("xpool", "t2v"), ("seqtransf", "v2t"),
        ("seqtransf", "t2v")]
# every adapter on CLIP4Clip-v2t and X-Pool-t2v (both heads, both directions); the LN-adapting reference methods
# and the gradient-free source on all six (the full tier's tests/adapters/test_adapter_contract.py runs every pair).
# seqTransf's own LayerNorms belong to the similarity head, not to the query encoder: the contract keeps them fixed
EVERYWHERE = {"source", "tent", "hatvtr", "tcr"}
CASES = [(env, name) for name in ADAPTERS for env in ENVS
         if name in EVERYWHERE or env in (("meanp", "v2t"), ("xpool", "t2v"))]


@functools.cache
def _env(head: str, task: str):
    return build_fast_env(head, task, batch_sizes=(4, 3))


@pytest.fixture(params=ENVS, ids=lambda p: f"{p[0]}-{p[1]}")
def env(request):
    return _env(*request.param)


def _query_ln_names(model, task: str) -> set[str]:
    side = "video" if task == "v2t" else "text"
    tower = model.tower(side)
    prefixes = [n for n, m in model.named_modules() if m is tower]
    out = set()
    for ln_name, ln in model.layer_norms(side):
        for pname, _ in ln.named_parameters(recurse=False):
            local = f"{ln_name}.{pname}" if ln_name else pname
            out |= {f"{p}.{local}" if p else local for p in prefixes}
    return out


def test_every_adapter_config_is_covered():
    assert {"source", "hsm", "hatvtr", "tcr", "tent", "eata", "sar", "read"} <= set(ADAPTERS)


@pytest.mark.parametrize(("case", "name"), CASES, ids=[f"{e[0]}-{e[1]}-{n}" for e, n in CASES])
def test_adapter_contract(case, name):
    env = _env(*case)
    adapter = make_fast_adapter(env, name)
    model = adapter.model
    before = state_copy(model)
    allowed = _query_ln_names(model, env.task)
    assert allowed, "the tiny model has no query-side LayerNorms"
    named = dict(model.named_parameters())
    adapted = {id(p) for p in adapter.params_to_adapt()}
    assert adapted <= {id(named[n]) for n in allowed}, f"{name} adapts parameters outside the query LayerNorms"

    adapter.setup("test")
    optim0 = copy.deepcopy(adapter.optimizer.state_dict()) if adapter.optimizer is not None else None
    first = stream(adapter, env.batches)
    assert first.shape == (sum(len(b["index"]) for b in env.batches), env.gallery.shape[0])
    assert torch.isfinite(first).all(), f"{name}: non-finite scores"

    assert_contract_after_stream(name, adapter, before, allowed, name in UNTOUCHED or not adapted, optim0, first,
                                 env.batches)


def test_gradient_methods_do_move_the_query_layernorms():
    """On the tiny model the LN-adapting methods really update something (the contract is not vacuous)."""
    env = _env("meanp", "v2t")
    for name in ("tent", "hatvtr"):
        adapter = make_fast_adapter(env, name)
        before = state_copy(adapter.model)
        stream(adapter, env.batches)
        after = state_copy(adapter.model)
        assert any(not torch.equal(before[k], after[k]) for k in before), f"{name} did not update anything"


def test_source_scores_the_frozen_model(env):
    adapter = make_fast_adapter(env, "source")
    rows = stream(adapter, env.batches)
    with torch.no_grad():
        for batch, got in zip(env.batches, rows.split([len(b["index"]) for b in env.batches]), strict=True):
            feats = env.model.encode_video(batch["video"]) if env.task == "v2t" else env.model.encode_text(
                batch["tokens"])
            torch.testing.assert_close(got, env.model.similarity(feats, env.gallery).float(), rtol=0, atol=1e-6)


def test_segment_change_resets_per_shift():
    """A new ``segment`` in the batch dict resets a per_shift adapter: the same batch scores as on a fresh model."""
    env = build_fast_env("meanp", "v2t", batch_sizes=(4, 4), segments=(0, 1))
    first = env.batches[0]
    again = dict(first, segment=1)
    adapter = make_fast_adapter(env, "tent")
    rows = stream(adapter, [first, again])
    assert torch.equal(rows[:4], rows[4:])


def test_a_two_pass_method_without_second_pass_is_refused_when_defined():
    from tta.adapters.base import OnlineAdapter

    with pytest.raises(TypeError, match="two_pass = True but does not define second_pass"):
        type("TwoPassWithoutSecond", (OnlineAdapter,), {"two_pass": True})
