"""Shipped embedded weights (tta/synth/shipped.py): export keeps only trained tensors, a rebuild must hash to the
exported digest, the zoo uses them instead of training, and the files in the repository are the ones the default
configs ask for."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import tta.synth.shipped as shipped
from tests.fixtures import tiny_tower_config
from tta.data.gallery import weights_digest
from tta.models.checkpoint import load_checkpoint, save_checkpoint
from tta.models.retrieval import RetrievalModel


def _trained_tiny(tmp_path: Path, name: str = "tiny.pt") -> tuple[Path, str]:
    """A tiny model whose vision tower 'trained' (moved from the initialisation of seed 0), saved as a checkpoint."""
    torch.manual_seed(0)
    model = RetrievalModel(tiny_tower_config(), head="meanp")
    with torch.no_grad():
        for p in model.clip.visual.parameters():
            p.add_(0.01)
    return save_checkpoint(tmp_path / name, model), weights_digest(model)


def test_export_keeps_the_trained_tensors_and_a_rebuild_must_hash_to_the_digest(tmp_path, monkeypatch, caplog):
    checkpoint, digest = _trained_tiny(tmp_path)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path / "weights")
    torch.manual_seed(0)  # the export's fresh model starts where training did: only the vision tower differs
    out = shipped.export(checkpoint)
    kept = torch.load(out, weights_only=False)["state_dict"]
    assert kept and all(k.startswith("clip.visual.") for k in kept)
    # rebuilt from another random initialisation, the untrained tensors differ: refused, nothing written
    torch.manual_seed(1)
    assert not shipped.materialise(out, tmp_path / "rebuilt.pt")
    assert not (tmp_path / "rebuilt.pt").exists() and "training the model instead" in caplog.text
    torch.manual_seed(0)  # the initialisation the exported tensors complete
    assert shipped.materialise(out, tmp_path / "rebuilt.pt")
    assert weights_digest(load_checkpoint(tmp_path / "rebuilt.pt")) == digest


def test_a_damaged_shipped_file_falls_back_to_training(tmp_path, caplog):
    bad = tmp_path / "clip4clip-synth-x.pt"
    bad.write_bytes(b"not a torch file")
    assert not shipped.materialise(bad, tmp_path / "out.pt")
    assert "corrupt" in caplog.text and not (tmp_path / "out.pt").exists()


@pytest.mark.heavy  # calls the zoo (the tier rule cannot see that it neither trains nor renders), about 3 s
def test_the_zoo_rebuilds_a_shipped_checkpoint_without_training(tmp_path, monkeypatch):
    from omegaconf import OmegaConf

    from tta.synth import zoo
    from tta.utils.config import compose

    cfg = compose("run", [])
    cache = tmp_path / "cache"
    pre = zoo._pretrained_path(zoo._train_cfg("pretrain", cfg.model, None, cache), cache)
    ft = zoo._train_cfg("finetune", cfg.model, cfg.data, cache)
    name = zoo._finetuned_path(cfg.model, cfg.data, ft, pre, cache).name
    # a shipped file under that name (a tiny model: every tensor of it is stored, so any rebuild matches)
    checkpoint, digest = _trained_tiny(tmp_path, name)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path / "weights")
    shipped.export(checkpoint)

    def no_training(train_cfg):
        raise AssertionError(f"trained {OmegaConf.select(train_cfg, 'stage')}")

    monkeypatch.setattr("tta.train.train", no_training)
    path = zoo.ensure_embedded_checkpoint(cfg.model, cfg.data, cache)
    assert path.name == name and weights_digest(load_checkpoint(path)) == digest
    assert not pre.exists()  # the pretrained model is needed only to train the fine-tuned one
    path.unlink()
    monkeypatch.setenv(shipped.TRAIN_ENV, "1")
    with pytest.raises(AssertionError, match="trained pretrain"):
        zoo.ensure_embedded_checkpoint(cfg.model, cfg.data, cache)


@pytest.mark.heavy  # rebuilds each shipped checkpoint with the real MiniLM trunk
def test_the_shipped_files_are_what_the_default_configs_ask_for_and_rebuild_exactly(tmp_path):
    from tta.synth import zoo
    from tta.utils.config import compose

    wanted = set()
    for model, data in [(m, d) for m in ("clip4clip", "xpool") for d in ("synth", "synth_b")]:
        cfg = compose("run", [f"model={model}", f"data={data}"])
        pre = zoo._pretrained_path(zoo._train_cfg("pretrain", cfg.model, None, tmp_path), tmp_path)
        ft = zoo._train_cfg("finetune", cfg.model, cfg.data, tmp_path)
        wanted |= {pre.name, zoo._finetuned_path(cfg.model, cfg.data, ft, pre, tmp_path).name}
    files = {p.name for p in shipped.SHIPPED_DIR.glob("*.pt")}
    assert files == wanted, "tta/synth/weights is stale: re-export with python -m tta.synth.shipped export"
    for name in sorted(files):
        assert shipped.materialise(shipped.SHIPPED_DIR / name, tmp_path / name), name


def test_export_refuses_what_it_cannot_ship_with_one_line(tmp_path, capsys):
    assert shipped.main(["export", str(tmp_path / "none.pt")]) == 2
    assert shipped.main([]) == 2
    checkpoint, _ = _trained_tiny(tmp_path)  # arch=custom: every tensor is its own, nothing to leave out
    assert shipped.main(["export", str(checkpoint)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 3 and "does not exist" in err[0] and "not an embedded checkpoint" in err[2]
