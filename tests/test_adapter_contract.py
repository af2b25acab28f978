"""The contract every adapter in conf/adapter/ keeps (ARCHITECTURE.md "Habits"), on both backbones and directions
of the tiny embedded benchmark:

* only the query encoder's LayerNorm weights and biases may move (nothing for gradient-free methods);
* ``reset()`` restores the parameters and the optimizer state bit-exactly, and clears the method state: the first
  batch after a reset gives the same scores bit for bit;
* ``source`` and ``hsm`` leave the whole model untouched and ``source`` scores the frozen model's similarity.

The adapters are discovered from the config folder, so a new ``conf/adapter/<name>.yaml`` is tested automatically.
"""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from tests.adapter_env import build_env, make_adapter, stream
from tta.utils.config import CONF_DIR

pytestmark = pytest.mark.usefixtures("single_thread_torch")

ADAPTERS = sorted(p.stem for p in (Path(CONF_DIR) / "adapter").glob("*.yaml"))
UNTOUCHED = {"source", "hsm"}  # must not change any parameter, whatever their config


@pytest.fixture(scope="module", params=[("clip4clip", "v2t"), ("xpool", "v2t"), ("clip4clip", "t2v"),
                                        ("xpool", "t2v")], ids=lambda p: f"{p[0]}-{p[1]}")
def env(request, tiny_cache):
    return build_env(tiny_cache, *request.param, batch_sizes=(4, 2))


def _state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _same(a, b) -> bool:
    """Recursive bit-exact equality of (nested) optimizer state dicts."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_adapters_are_discovered():
    assert {"source", "hsm", "hatvtr", "tcr"} <= set(ADAPTERS)


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_contract(env, name):
    adapter = make_adapter(env, name)
    model = adapter.model
    before = _state(model)
    allowed = {f"{prefix}.{n}" for prefix in _tower_prefix(model, env.cfg.task)
               for n, _ in _ln_param_names(model, env.cfg.task)}
    adapted = {id(p) for p in adapter.params_to_adapt()}
    named = dict(model.named_parameters())
    assert adapted <= {id(named[n]) for n in allowed}, f"{name} adapts parameters outside the query LayerNorms"

    adapter.setup("test")
    optim0 = copy.deepcopy(adapter.optimizer.state_dict()) if adapter.optimizer is not None else None
    first = stream(adapter, env.batches)
    assert first.shape == (sum(len(b["index"]) for b in env.batches), env.gallery.shape[0])
    assert torch.isfinite(first).all()

    after = _state(model)
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved <= allowed, f"{name} changed {sorted(moved - allowed)[:5]}"
    if name in UNTOUCHED or not adapted:
        assert not moved, f"{name} is gradient-free but changed {sorted(moved)[:5]}"
    for k in after:
        assert torch.isfinite(after[k]).all(), f"{name}: non-finite {k}"

    adapter.reset()
    restored = _state(model)
    assert all(torch.equal(before[k], restored[k]) for k in before), f"{name}: reset() did not restore the weights"
    if optim0 is not None:
        assert _same(optim0, adapter.optimizer.state_dict()), f"{name}: optimizer state not restored"
    again = stream(adapter, env.batches[:1])
    assert torch.equal(first[: len(again)], again), f"{name}: scores after reset() differ from the first pass"


def test_source_scores_the_frozen_model(env):
    adapter = make_adapter(env, "source")
    rows = stream(adapter, env.batches)
    with torch.no_grad():
        for batch, got in zip(env.batches, rows.split([len(b["index"]) for b in env.batches]), strict=True):
            feats = env.model.encode_video(batch["video"]) if env.cfg.task == "v2t" else env.model.encode_text(
                batch["tokens"])
            torch.testing.assert_close(got, env.model.similarity(feats, env.gallery).float(), rtol=0, atol=1e-6)


def _tower_prefix(model, task: str) -> list[str]:
    tower = model.tower("video" if task == "v2t" else "text")
    return [n for n, m in model.named_modules() if m is tower]


def _ln_param_names(model, task: str):
    for ln_name, ln in model.layer_norms("video" if task == "v2t" else "text"):
        for pname, p in ln.named_parameters(recurse=False):
            yield (f"{ln_name}.{pname}" if ln_name else pname), p
