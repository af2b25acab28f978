"""The contract every adapter in conf/adapter/ keeps (ARCHITECTURE.md "Habits"), on both backbones and directions
of the tiny embedded benchmark:

* only the query encoder's LayerNorm weights and biases may move (nothing for gradient-free methods);
* ``reset()`` restores the parameters and the optimizer state bit-exactly, and clears the method state: the first
  batch after a reset gives the same scores bit for bit;
* ``source`` and ``hsm`` leave the whole model untouched and ``source`` scores the frozen model's similarity;
* the resumable state is what the adapter declares (``state_keys``), and a run resumed from it after two batches
  scores the third batch bit for bit as the uninterrupted run.

The adapters are discovered from the config folder, so a new ``conf/adapter/<name>.yaml`` is tested automatically.
"""

from __future__ import annotations

import copy
from pathlib import Path

import lightning as L
import pytest
import torch
from torch.utils.data import DataLoader

from tests.adapters.adapter_env import build_env, make_adapter
from tests.fixtures import assert_contract_after_stream, state_copy, stream
from tta.adapters.base import BASE_STATE_KEYS
from tta.utils.config import CONF_DIR

pytestmark = pytest.mark.usefixtures("single_thread_torch")

ADAPTERS = sorted(p.stem for p in (Path(CONF_DIR) / "adapter").glob("*.yaml"))
UNTOUCHED = {"source", "hsm"}  # must not change any parameter, whatever their config


@pytest.fixture(scope="module", params=[("clip4clip", "v2t"), ("xpool", "v2t"), ("clip4clip", "t2v"),
                                        ("xpool", "t2v")], ids=lambda p: f"{p[0]}-{p[1]}")
def env(request, tiny_cache):
    return build_env(tiny_cache, *request.param, batch_sizes=(4, 2))


def test_adapters_are_discovered():
    assert {"source", "hsm", "hatvtr", "tcr"} <= set(ADAPTERS)


@pytest.mark.parametrize("name", ADAPTERS)
def test_adapter_contract(env, name):
    adapter = make_adapter(env, name)
    model = adapter.model
    before = state_copy(model)
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

    assert_contract_after_stream(name, adapter, before, allowed, name in UNTOUCHED or not adapted, optim0, first,
                                 env.batches)


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


# ---------------------------------------------------------------------------------------------------- resume
RESUMABLE = ["hatvtr", "noregret", "sar", "eata", "tcr", "qbnorm"]


@pytest.fixture(scope="module")
def env3(tiny_cache):
    return build_env(tiny_cache, "clip4clip", "v2t", batch_sizes=(4, 3, 3))


class _Resume(L.Callback):
    """The runner's resume callback: loads the state once the test loop has set the adapter up."""

    def __init__(self, state: dict):
        self.state = state

    def on_test_epoch_start(self, trainer, pl_module):
        pl_module.load_resume_state(self.state)


def _stream_resumed(adapter, state: dict, batches: list[dict], accelerator: str = "cpu") -> torch.Tensor:
    before = len(state["attrs"]["rows"])
    trainer = L.Trainer(accelerator=accelerator, devices=1, inference_mode=False, logger=False,
                        enable_checkpointing=False,
                        enable_model_summary=False, enable_progress_bar=False, callbacks=[_Resume(state)])
    trainer.test(adapter, dataloaders=DataLoader(batches, batch_size=None), verbose=False)
    return torch.cat(adapter.rows[before:])


def _round_trip(adapter, tmp_path: Path) -> dict:
    torch.save(adapter.resume_state(), tmp_path / "resume.pt")
    return torch.load(tmp_path / "resume.pt", weights_only=False)


@pytest.mark.parametrize("name", RESUMABLE)
def test_resume_after_two_batches_scores_the_third_bit_exactly(env3, name, tmp_path):
    full = make_adapter(env3, name)
    uninterrupted = stream(full, env3.batches)
    first = make_adapter(env3, name)
    stream(first, env3.batches[:2])
    state = _round_trip(first, tmp_path)
    resumed = make_adapter(env3, name)
    third = _stream_resumed(resumed, state, env3.batches[2:])
    assert torch.equal(third, uninterrupted[-len(third):]), f"{name}: the resumed batch differs"
    assert [h.batch for h in resumed.history] == [0, 1, 2]  # the numbering goes on from the restored history
    assert resumed.counters == full.counters
    assert all(torch.equal(a, b) for a, b in zip(resumed.params_to_adapt(), full.params_to_adapt(), strict=True))
    bare = make_adapter(env3, name)  # nothing left to stream: setup() then load, as the runner does
    bare.setup("test")
    bare.load_resume_state(_round_trip(full, tmp_path))
    assert torch.equal(bare.scores()[0], full.scores()[0]) and len(bare.history) == 3


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("name", RESUMABLE)
def test_a_stream_resumed_on_cuda_finds_its_state_on_the_device(env3, name, tmp_path):
    """A checkpoint written on the GPU, read as the runner reads it (tta.callbacks.load_resume_file): the method's
    memories and running values come back on the device, and the resumed batch scores as the uninterrupted one."""
    from tta.callbacks import load_resume_file

    full = make_adapter(env3, name)
    uninterrupted = stream(full, env3.batches, accelerator="gpu")
    first = make_adapter(env3, name)
    stream(first, env3.batches[:2], accelerator="gpu")
    torch.save(first.resume_state(), tmp_path / "resume.pt")
    state = load_resume_file(tmp_path / "resume.pt", "cuda:0")
    resumed = make_adapter(env3, name)
    third = _stream_resumed(resumed, state, env3.batches[2:], accelerator="gpu").cpu()
    expected = uninterrupted[-len(third):].cpu()
    assert torch.allclose(third, expected, rtol=0, atol=1e-5), f"{name}: the resumed batch differs"
    assert torch.equal(third.argmax(dim=1), expected.argmax(dim=1))
    assert [h.batch for h in resumed.history] == [0, 1, 2]


def test_only_declared_attributes_are_resume_state(env3):
    adapter = make_adapter(env3, "hatvtr")
    stream(adapter, env3.batches[:1])
    adapter.scratch = torch.ones(3)  # a method attribute not in state_keys
    state = adapter.resume_state()
    assert adapter._views is not None  # the normalised gallery copy exists but is derived, not state
    assert set(state["attrs"]) == set(BASE_STATE_KEYS) | {"hsm", "rm", "_rm_targets", "rm_accuracy"}
    assert not {"scratch", "_views", "model", "gallery", "optimizer", "watch"} & set(state["attrs"])
    sar = make_adapter(env3, "sar")
    assert set(sar.resume_state()["attrs"]) == set(BASE_STATE_KEYS) | {"ema"}
    qb = make_adapter(env3, "qbnorm")
    assert set(qb.resume_state()["parts"]["refiner"]) == {"bank", "normalised", "seen"}
