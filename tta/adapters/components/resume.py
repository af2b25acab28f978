"""An adapter's resumable state: what makes the rest of a stream come out as if it had never been interrupted.

The base's own attributes (:data:`BASE_STATE_KEYS`, the kept scores'), every key a class lists in its ``state_keys``
class attribute (collected over the class hierarchy: a method lists only the attributes it adds — memories, EMAs,
queues, Fisher), the declared ``state_keys`` of the objects named in ``state_parts`` (the post-hoc refiner), the
adapted parameters, the optimizer state and the RNG states. An attribute that is not declared is not saved: derived
copies (a normalised gallery), the model and the gallery are rebuilt by the runner.
"""

from __future__ import annotations

import random

import numpy as np
import torch

from tta.adapters.components.scores import KeptScores

#: the base's resumable attributes: the kept scores' and the base's own (a method adds its own with ``state_keys``)
BASE_STATE_KEYS = (*KeptScores.state_keys, "history", "counters", "r1", "_segment")


def declared(cls: type, attr: str) -> tuple[str, ...]:
    """The union of a class attribute (``state_keys`` or ``state_parts``) over the class hierarchy."""
    keys: list[str] = []
    for klass in reversed(cls.__mro__):
        keys += [k for k in klass.__dict__.get(attr, ()) if k not in keys]
    return tuple(keys)


def resume_keys(adapter) -> tuple[str, ...]:
    """The resumable attribute names: :data:`BASE_STATE_KEYS` and every declared ``state_keys``."""
    return BASE_STATE_KEYS + tuple(k for k in declared(type(adapter), "state_keys") if k not in BASE_STATE_KEYS)


def _owner(adapter, key: str):
    return adapter.kept if key in KeptScores.state_keys else adapter


def capture(adapter) -> dict:
    """The resumable state of ``adapter``, as references to the live objects: serialise it right away."""
    parts = {name: _declared_state(getattr(adapter, name)) for name in declared(type(adapter), "state_parts")}
    return {"attrs": {k: getattr(_owner(adapter, k), k) for k in resume_keys(adapter)}, "parts": parts,
            "params": [p.detach().clone() for p in adapter.params_to_adapt()],
            "optim": adapter.optimizer.state_dict() if adapter.optimizer is not None else None,
            "rng": {"torch": torch.get_rng_state(), "numpy": np.random.get_state(), "python": random.getstate(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}}


def restore(adapter, state: dict) -> None:
    """Restore :func:`capture` on the freshly bound source model, after ``setup`` (the optimizer exists)."""
    keys = resume_keys(adapter)
    missing = set(keys) - set(state["attrs"])
    if missing:
        raise ValueError(f"the checkpoint lacks {sorted(missing)}: it was written by another adapter")
    for key in keys:
        setattr(_owner(adapter, key), key, state["attrs"][key])
    adapter.kept.to(adapter.device)  # unpickled on the CPU; the scores arrive on the adapter's device
    for name, values in state["parts"].items():
        _load_declared_state(getattr(adapter, name, None), values)
    params = adapter.params_to_adapt()
    if len(params) != len(state["params"]):
        raise ValueError(f"the checkpoint holds {len(state['params'])} adapted tensors, this adapter adapts "
                         f"{len(params)}: it was written by another adapter or model")
    with torch.no_grad():
        for p, saved in zip(params, state["params"], strict=True):
            p.copy_(saved)
    if adapter.optimizer is not None and state["optim"] is not None:
        adapter.load_optimizer_state(state["optim"])
    rng = state["rng"]
    torch.set_rng_state(rng["torch"])
    np.random.set_state(rng["numpy"])
    random.setstate(rng["python"])
    if rng.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(rng["cuda"])


def _declared_state(obj) -> dict | None:
    """The attributes ``obj`` lists in its ``state_keys`` (None for no object)."""
    if obj is None:
        return None
    return {k: getattr(obj, k) for k in getattr(obj, "state_keys", ())}


def _load_declared_state(obj, values: dict | None) -> None:
    if obj is None or values is None:
        return
    for key, value in values.items():
        setattr(obj, key, value)
