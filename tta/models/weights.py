"""Reading weight files from disk: plain or wrapped state dicts, OpenAI TorchScript archives and safetensors.

Used by the towers (``model.pretrained=<file>``, :mod:`tta.models.towers`) and by the import of official
fine-tuned checkpoints (:mod:`tta.models.convert`). Files are unpickled with ``weights_only=True`` (tensors and
plain containers only); a file that needs arbitrary unpickling is refused unless the caller trusts it.
"""

from __future__ import annotations

import logging
import os
import pickle
import zipfile

import torch

log = logging.getLogger(__name__)

__all__ = ["read_weights", "unwrap_state_dict"]

# metadata entries of OpenAI's TorchScript CLIP archives that are not parameters
_OPENAI_JIT_EXTRAS = ("input_resolution", "context_length", "vocab_size")


def _is_torchscript(path: str) -> bool:
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return any(n.endswith("constants.pkl") or "/code/" in n for n in z.namelist())


def read_weights(path: str | os.PathLike, trust_pickle: bool = False) -> object:
    """Loads a weight file as stored (a dict, or the state dict of a TorchScript archive).

    Args:
        path: ``.pt`` / ``.pth`` / ``.bin`` (torch.save), an OpenAI TorchScript ``.pt``, or ``.safetensors``.
        trust_pickle: Allow full unpickling when the file holds more than tensors and plain containers.

    Raises:
        FileNotFoundError: If the file does not exist.
        ValueError: If the file cannot be read safely (and ``trust_pickle`` is false) or is not a weight file.
    """
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"weight file {path!r} not found")
    if path.endswith(".safetensors"):
        from safetensors.torch import load_file

        return load_file(path, device="cpu")
    if _is_torchscript(path):
        state = torch.jit.load(path, map_location="cpu").state_dict()
        return {k: v for k, v in state.items() if k not in _OPENAI_JIT_EXTRAS}
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, AttributeError) as e:
        if not trust_pickle:
            raise ValueError(
                f"{path} holds objects other than tensors and plain containers, so it was not unpickled "
                f"({str(e).splitlines()[0][:200]}). If you trust the file, pass trust_pickle=True "
                f"(CLI: --trust-pickle)."
            ) from e
        log.warning("unpickling %s with weights_only=False (trusted by the caller)", path)
        return torch.load(path, map_location="cpu", weights_only=False)


def unwrap_state_dict(blob: object, path: str | os.PathLike = "<weights>") -> dict[str, torch.Tensor]:
    """The tensor dict inside a checkpoint: ``blob['state_dict']`` (X-Pool, Lightning), ``blob['model']`` or the
    blob itself; a ``module.`` prefix (DataParallel) is removed.

    Raises:
        ValueError: If no dict of tensors is found.
    """
    state = blob
    if isinstance(blob, dict):
        for key in ("state_dict", "model"):
            if isinstance(blob.get(key), dict):
                state = blob[key]
                break
    if not isinstance(state, dict) or not state:
        raise ValueError(f"{os.fspath(path)}: expected a state dict (name -> tensor), found {type(state).__name__}")
    tensors = {k: v for k, v in state.items() if isinstance(v, torch.Tensor)}
    if not tensors:
        raise ValueError(f"{os.fspath(path)}: the dict holds no tensors (keys {list(state)[:5]})")
    if all(k.startswith("module.") for k in tensors):
        tensors = {k[len("module."):]: v for k, v in tensors.items()}
    return tensors
