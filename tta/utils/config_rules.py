"""The check of a run's config before any work: every numeric option against its declared bound, then the
relations between options.

A config node whose ``_target_`` is one of the project's classes (an adapter, a score refiner, a data generator),
or whose keys one class reads (``NODE_OWNERS``: the towers of ``model``), is checked against the bounds its owner declares (tta/utils/bounds.py: :func:`~tta.utils.bounds.declared_bounds`),
the same declaration that checks the owner's option dataclass when it is built. A node that names its implementation
in a registry (``shift``: ``name`` + ``options``) is checked against the bounds that implementation declared where it
registered (``NAMED_OWNERS``). ``RULES`` holds the bounds of the
keys no such owner reads (run-level keys, trainer and logger, the entry points, the launcher): dotted key patterns
(``fnmatch``: ``*`` spans dots, ``[]`` stands for any list item), the first match winning. :func:`validate_config`
raises one ``ConfigValueError`` line (exit code 2 through the runner) naming the key, the value and what is valid;
relations between keys follow in ``RELATIONS``. tests/utils/test_config_rules.py fails when a numeric option of a
shipped config has no bound. Per-shift severity ranges stay with the shift registry (tta/scenario.py).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator
from fnmatch import fnmatchcase
from typing import Any

from tta.utils.bounds import (
    NON_NEGATIVE,
    POSITIVE,
    SEED,
    ConfigValueError,
    Int,
    Num,
    Real,
    check_value,
    declared_bounds,
)

__all__ = ["ConfigValueError", "RULES", "leaves", "owned_bounds", "rule_for", "validate_config"]

# the keys no project class owns: key pattern -> accepted values; first match wins. A value the code would silently
# turn into NaN scores, empty sets or Python slicing from the end is outside its range.
RULES: tuple[tuple[str, Num], ...] = (
    # ---- the run (conf/run.yaml)
    ("seed", SEED),
    ("shift_seed", Num(0, 2**32 - 1, integer=True, null="the run seed")),
    ("batch_size", Int(1)),
    ("loader_workers", Int(0, words=("auto",))),
    ("hubness.k", Int(1)),
    ("save.sims_head", Int(0)),
    ("collapse_share", Real(0, 1, lo_open=True)),
    ("checkpoint_every", Int(0)),
    ("inputs.min_frames", Int(1)),
    ("inputs.max_side", Int(1, null="never downscale")),
    # ---- data, model, shift, trainer, logger groups
    ("data.subset", Int(1, null="every test pair")),
    ("data.num_frames", Int(1)),
    ("data.workers", Int(0)),
    ("comp_probe.subset", Int(2, null="every video of the split")),
    ("comp_probe.seed", SEED),
    ("shift.severity", Int(0)),  # the range of each shift is checked against its registry entry
    # the run's D_q filter of any text shift (tta/scenario.py), read before the shift sees its options; the other
    # shift.options.* are bounded by the shift that reads them (NAMED_OWNERS)
    ("shift.options.min_similarity", Real(0, 1, lo_open=True, null="no D_q filter")),
    ("trainer.devices", Int(1, words=("auto",))),
    ("trainer.num_nodes", Int(1)),
    ("trainer.log_every_n_steps", Int(1)),
    ("logger.log_every", Int(1)),
    # ---- the other entry points (conf/train.yaml, conf/perturb.yaml, conf/contact_sheet.yaml)
    ("steps", Int(1)),
    ("warmup", Int(0)),
    ("lr", NON_NEGATIVE),
    ("weight_decay", NON_NEGATIVE),
    ("workers", Int(0)),
    ("frames_per_sample", Int(1)),
    ("logit_scale_init", POSITIVE),
    ("eval_subset", Int(1, null="every pair")),
    ("text_trunk_trainable_layers", Int(0)),
    ("text_trunk_lr", Real(0, null="the lr of the rest")),
    ("comp_loss.weight", NON_NEGATIVE),
    ("comp_loss.tau", POSITIVE),
    ("pretrain_overrides.steps", Int(1)),
    ("pretrain_overrides.batch_size", Int(1)),
    ("pretrain_overrides.frames_per_sample", Int(1)),
    ("pretrain_overrides.lr", NON_NEGATIVE),
    ("severities[]", Int(0)),
    ("video_index", Int(0)),
    # ---- the SLURM launcher (conf/hydra/launcher/slurm.yaml)
    ("hydra.launcher.timeout_min", Int(1)),
    ("hydra.launcher.mem_gb", Int(1)),
    ("hydra.launcher.*", Int(1)),  # nodes, GPUs, tasks, CPUs, array parallelism
)


# config nodes that name their implementation by ``name`` in a registry, not by ``_target_``: node -> the function
# (a dotted path, imported like a ``_target_``) giving the bounds the named implementation declared for its ``options``
NAMED_OWNERS: dict[str, str] = {"shift": "tta.shifts.option_bounds", "gallery_shift": "tta.shifts.option_bounds"}
# config nodes without a ``_target_`` whose keys one class reads (tta/models/factory.py builds the towers from
# ``model``): node -> that class
NODE_OWNERS: dict[str, str] = {"model": "tta.models.towers.TowerConfig"}


def rule_for(key: str, value: Any = 0) -> Num | None:
    """The rule of a dotted key (list items as ``key[]``), or None when no pattern matches. A wildcard pattern
    judges numbers only (``hydra.launcher.*`` covers the sizes, not ``hydra.launcher.partition``); an exact key judges any value.
    ``gallery_shift.*`` takes the values of ``shift.*`` (the same shift configs), ``model.finetune_overrides.*`` those
    of the training config it overrides."""
    if key.startswith("gallery_shift."):
        key = key[len("gallery_"):]
    key = key.removeprefix("model.finetune_overrides.")
    for pattern, rule in RULES:
        if fnmatchcase(key, pattern):
            exact = not any(c in pattern for c in "*?")
            return rule if exact or _is_number(value) else None
    return None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def leaves(node: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every scalar below a plain container (list items as ``key[]``)."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else str(k))
    elif isinstance(node, (list, tuple)):
        for v in node:
            yield from leaves(v, f"{prefix}[]")
    else:
        yield prefix, node


def owner_nodes(node: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted path, ``_target_``) of every node whose ``_target_`` is one of the project's objects and that holds
    options beside it, and of the ``NODE_OWNERS`` nodes with their owner."""
    if not isinstance(node, dict):
        return
    if not prefix:
        yield from ((key, owner) for key, owner in NODE_OWNERS.items() if isinstance(node.get(key), dict))
    target = node.get("_target_")
    if isinstance(target, str) and target.startswith("tta.") and set(node) - {"_target_"}:
        yield prefix, target
    for k, v in node.items():
        yield from owner_nodes(v, f"{prefix}.{k}" if prefix else str(k))


def locate_owner(target: str) -> Any:
    """The object a ``_target_`` names, or None when it cannot be imported (instantiating it reports why)."""
    module, _, name = target.rpartition(".")
    try:
        return getattr(importlib.import_module(module), name, None)
    except Exception:  # noqa: BLE001 - a broken _target_ is reported in one line where it is instantiated
        return None


def named_nodes(cfg: dict) -> Iterator[tuple[str, str, str]]:
    """(dotted path of the options, registered name, bounds function) of every ``NAMED_OWNERS`` node of ``cfg`` that
    sets options."""
    for key, finder in NAMED_OWNERS.items():
        node = cfg.get(key)
        if isinstance(node, dict) and isinstance(node.get("name"), str) and node.get("options"):
            yield f"{key}.options", node["name"], finder


def owned_bounds(cfg: dict) -> dict[str, Num]:
    """Full dotted key -> bound, for the options of every owner node of ``cfg`` (imports the owners)."""
    out: dict[str, Num] = {}
    for path, target in owner_nodes(cfg):
        for key, rule in declared_bounds(locate_owner(target)).items():
            out[f"{path}.{key}" if path else key] = rule
    for path, name, finder in named_nodes(cfg):
        bounds = locate_owner(finder)
        for key, rule in (bounds(name) if bounds is not None else {}).items():
            out[f"{path}.{key}"] = rule
    return out


def bound_for(key: str, value: Any, owned: dict[str, Num]) -> Num | None:
    """The bound of a leaf: its owner's (an item of a mapping or list option takes the option's bound), else the
    ``RULES`` of the keys no project class owns."""
    for option in (key, *(key[:i] for i in range(len(key) - 1, 0, -1) if key[i] in ".[")):
        if option in owned:
            return owned[option]
    return rule_for(key, value)


def _get(cfg: dict, key: str) -> Any:
    node: Any = cfg
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _hubness_k_below_gallery(cfg: dict) -> str | None:
    """hubness@k needs more gallery items than k; the gallery is at most data.subset (or the synthetic test set)."""
    k = _get(cfg, "hubness.k")
    for key in ("data.subset", "data.synth.n_test"):
        n = _get(cfg, key)
        if _is_number(k) and _is_number(n) and n <= k:
            return (f"hubness.k={k} must be smaller than the gallery size ({key}={n}); use a larger {key} or "
                    f"hubness.k <= {max(1, n - 1)}")
    return None


def _events_range(cfg: dict) -> str | None:
    """A multi-event dataset draws its events per clip from [min_events, max_events]."""
    low, high = _get(cfg, "data.synth.min_events"), _get(cfg, "data.synth.max_events")
    if _is_number(low) and _is_number(high) and high < low:
        return f"data.synth.max_events={high} is below data.synth.min_events={low}; raise max_events"
    return None


def _text_trunk_training(cfg: dict) -> str | None:
    """A training config's text-trunk options must describe one trunk: all frozen, its top blocks training, or all
    training."""
    layers, lr = _get(cfg, "text_trunk_trainable_layers"), _get(cfg, "text_trunk_lr")
    frozen = _get(cfg, "freeze_text_trunk")
    if layers and frozen is False:
        return (f"text_trunk_trainable_layers={layers} with freeze_text_trunk=false: the whole trunk trains already; "
                f"set freeze_text_trunk=true to train only its top blocks, or text_trunk_trainable_layers=0")
    if lr is not None and frozen is True and not layers:
        return (f"text_trunk_lr={lr} with a frozen text trunk (freeze_text_trunk=true, text_trunk_trainable_layers=0) "
                f"trains nothing; set text_trunk_trainable_layers > 0 or text_trunk_lr=null")
    return None


# the negatives tta/comp/training.py can put in a CompLoss chain (its NEGATIVES; a test keeps the two equal)
CHAIN_NEGATIVES = ("temp_reorder", "action_replace", "reorder_replaced")


def _comp_chain(cfg: dict) -> str | None:
    chain = _get(cfg, "comp_loss.chain")
    if chain is None:
        return None
    if not isinstance(chain, list) or not chain or any(n not in CHAIN_NEGATIVES for n in chain):
        return f"comp_loss.chain={chain}: expected a non-empty list of {', '.join(CHAIN_NEGATIVES)}"
    return None


# tta/models/text_clauses.py's TEXT_POOLS (a test keeps the two equal)
TEXT_POOLS = ("mean", "clauses")


def _text_pool(cfg: dict) -> str | None:
    """The clause pooling reads the embedded text tower's token states; other towers pool their own way."""
    pool, arch = _get(cfg, "model.text_pool"), _get(cfg, "model.arch")
    if pool is None:
        return None
    if pool not in TEXT_POOLS:
        return f"model.text_pool={pool}: expected one of {', '.join(TEXT_POOLS)}"
    if pool != "mean" and arch not in (None, "embedded"):
        return (f"model.text_pool={pool} pools the token states of the embedded text tower; model.arch={arch} has "
                f"only its end-of-text feature: use model.text_pool=mean")
    return None


def _adapter_keys(cfg: dict) -> str | None:
    """An adapter config is its ``name`` and its ``method``; a key beside them (``+adapter.steps=3``) is read by
    nothing, so the run would silently ignore it."""
    extra = sorted(set(cfg.get("adapter") or {}) - {"name", "method"})
    if extra:
        return (f"adapter.{extra[0]} is read by nothing: an adapter's options are under adapter.method "
                f"(adapter.method.{extra[0]}=...; python -m tta.run adapter=<name> --cfg job lists them)")
    return None


def _partial_stream(cfg: dict) -> str | None:
    """A run scores every query of its stream; Lightning's batch limits would end the stream early."""
    if "adapter" not in cfg:
        return None
    limit, dev_run = _get(cfg, "trainer.limit_test_batches"), _get(cfg, "trainer.fast_dev_run")
    whole = limit is None or (isinstance(limit, float) and limit == 1.0)  # an int is a number of batches
    off = dev_run is None or dev_run is False or (not isinstance(dev_run, bool) and dev_run == 0)
    for key, value, fine in (("limit_test_batches", limit, whole), ("fast_dev_run", dev_run, off)):
        if not fine:
            return (f"trainer.{key}={value} would end the query stream before its last batch, and a run is scored on "
                    f"every query: stream fewer queries with data.subset=N")
    return None


RELATIONS: tuple[Callable[[dict], str | None], ...] = (_hubness_k_below_gallery, _events_range, _text_trunk_training,
                                                      _comp_chain, _text_pool, _adapter_keys, _partial_stream)


def validate_config(cfg: Any) -> None:
    """Raise ConfigValueError for the first value outside its bound (or a broken relation between values). The keys
    no project class owns go first: a typo there is answered before the owners (and torch) are imported."""
    from omegaconf import DictConfig, OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    plain = {k: v for k, v in plain.items() if k != "hydra"}
    paths = [path for path, _ in owner_nodes(plain)] + [path for path, _, _ in named_nodes(plain)]

    def owned_leaf(key: str) -> bool:
        return any(key == p or key.startswith(f"{p}.") or not p for p in paths)

    found = list(leaves(plain))
    for key, value in found:
        if not owned_leaf(key) and (rule := rule_for(key, value)) is not None:
            check_value(key, value, rule)
    owned = owned_bounds(plain) if paths else {}
    for key, value in found:
        if owned_leaf(key) and (rule := bound_for(key, value, owned)) is not None:
            check_value(key, value, rule)
    for relation in RELATIONS:
        if (problem := relation(plain)) is not None:
            raise ConfigValueError(f"invalid configuration: {problem}")
