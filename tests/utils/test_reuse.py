"""In-process reuse (tta/utils/reuse.py): a kept object is handed out as a copy, a run's changes never reach the
next one, a rewritten file is built again, and a build that draws random numbers leaves the generator where a build
would have left it."""

from __future__ import annotations

import os

import torch

from tests.fixtures import tiny_model
from tta.models.checkpoint import load_checkpoint, save_checkpoint
from tta.utils import reuse


def test_kept_object_is_copied_and_never_changed_by_a_caller(monkeypatch):
    monkeypatch.setattr(reuse, "_KEPT", {})
    builds = []

    def build():
        builds.append(1)
        return torch.zeros(3)

    first = reuse.reuse("gallery", ("k",), build, torch.clone)
    first += 1  # the caller adapts its copy
    second = reuse.reuse("gallery", ("k",), build, torch.clone)
    assert len(builds) == 1 and torch.equal(second, torch.zeros(3)) and second is not first
    monkeypatch.setenv("TTA_REUSE", "0")
    reuse.reuse("gallery", ("k",), build, torch.clone)
    assert len(builds) == 2


def test_a_single_use_run_keeps_no_copy(monkeypatch):
    """A single command-line run (tta.run.main outside a sweep) builds its objects and keeps none: nothing after it
    in the process would reuse them."""
    monkeypatch.setattr(reuse, "_KEPT", {})
    with reuse.single_use():
        reuse.reuse("model", ("k",), lambda: torch.zeros(3), torch.clone)
        assert reuse.kept_count("model") == 0
    reuse.reuse("model", ("k",), lambda: torch.zeros(3), torch.clone)
    assert reuse.kept_count("model") == 1  # outside, the sweep's next job finds it


def test_a_build_drawing_random_numbers_leaves_the_generator_as_a_build_would(monkeypatch):
    monkeypatch.setattr(reuse, "_KEPT", {})

    def build():
        return torch.randn(4)

    torch.manual_seed(3)
    built = reuse.reuse("model", "r", build, torch.clone, draws_rng=True)
    after_build = torch.rand(2)
    torch.manual_seed(3)
    kept = reuse.reuse("model", "r", build, torch.clone, draws_rng=True)
    assert torch.equal(kept, built) and torch.equal(torch.rand(2), after_build)
    torch.manual_seed(4)  # another generator state: another object
    assert not torch.equal(reuse.reuse("model", "r", build, torch.clone, draws_rng=True), built)


def test_a_checkpoint_loaded_twice_gives_independent_source_models(tmp_path, monkeypatch):
    monkeypatch.setattr(reuse, "_KEPT", {})
    path = save_checkpoint(tmp_path / "tiny.pt", tiny_model())
    a = load_checkpoint(path)
    source = {k: v.clone() for k, v in a.state_dict().items()}
    with torch.no_grad():  # an adapted model, with a hook left behind
        for p in a.parameters():
            p.add_(1.0)
    a.register_forward_hook(lambda *args: None)
    b = load_checkpoint(path)
    assert b is not a and reuse.kept_count("model") == 1
    assert all(torch.equal(v, source[k]) for k, v in b.state_dict().items())
    assert not b._forward_hooks
    save_checkpoint(path, tiny_model(seed=1))  # rewritten: built again from the file
    os.utime(path, ns=(1, 1))
    c = load_checkpoint(path)
    assert not torch.equal(next(iter(c.state_dict().values())), next(iter(source.values()))) or any(
        not torch.equal(v, source[k]) for k, v in c.state_dict().items())


def test_towers_built_twice_at_one_generator_state_are_one_model_copied(monkeypatch):
    """``model.checkpoint=none`` (random towers): a sweep's next job at the same seed gets a copy of the model the
    first built, equal weight for weight, with the generator left where a build leaves it; another seed builds."""
    from tta.models.factory import model_from_config
    from tta.utils.config import compose

    monkeypatch.setattr(reuse, "_KEPT", {})
    model_cfg = compose("run", ["model.checkpoint=none"]).model

    def built(seed: int, enabled: bool = True):
        monkeypatch.setenv("TTA_REUSE", "1" if enabled else "0")
        torch.manual_seed(seed)
        model = model_from_config(model_cfg, "none")
        return model, torch.rand(3)

    plain, after_plain = built(0, enabled=False)
    first, _ = built(0)
    with torch.no_grad():  # the first job adapts its copy
        next(first.parameters()).add_(1.0)
    second, after_second = built(0)
    assert second is not first and reuse.kept_count("model") == 1
    assert all(torch.equal(v, plain.state_dict()[k]) for k, v in second.state_dict().items())
    assert torch.equal(after_second, after_plain) and not second.training
    other, _ = built(1)
    assert any(not torch.equal(v, plain.state_dict()[k]) for k, v in other.state_dict().items())
