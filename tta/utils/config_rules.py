"""Validation of every numeric option a user can set, in one table checked when a run starts.

``RULES`` maps dotted key patterns (``fnmatch``: ``*`` spans dots, ``[]`` stands for any list item) to the values
a key accepts: integer or real, finite, a range, and whether ``null`` or a few words are allowed. The first
matching pattern wins. :func:`validate_config` walks the composed config and raises one ``ConfigValueError`` line
(exit code 2 through the runner) naming the key, the value and what is valid; relations between keys follow in
``RELATIONS``. tests/utils/test_config_rules.py fails when a numeric option of a shipped config has no rule, so a
new option cannot be forgotten. Per-shift severity ranges stay with the shift registry (tta/scenario.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

INF = math.inf


class ConfigValueError(ValueError):
    """A configured value outside what its key accepts (a user error: one line, exit code 2)."""


@dataclass(frozen=True)
class Num:
    """A finite number in [lo, hi] (open ends with ``lo_open`` / ``hi_open``), integer when ``integer``; ``null``
    accepted when ``null`` says what it means; ``words`` are string values also accepted."""

    lo: float = -INF
    hi: float = INF
    integer: bool = False
    lo_open: bool = False
    hi_open: bool = False
    null: str | None = None
    words: tuple[str, ...] = ()

    def accepts(self, value: Any) -> bool:
        if value is None:
            return self.null is not None
        if isinstance(value, str):
            return value in self.words
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            return False
        if self.integer and not float(value).is_integer():
            return False
        low_ok = value > self.lo if self.lo_open else value >= self.lo
        high_ok = value < self.hi if self.hi_open else value <= self.hi
        return low_ok and high_ok

    def describe(self) -> str:
        kind = "an integer" if self.integer else "a finite number"
        bounds = []
        lo, hi = _num(self.lo), _num(self.hi)
        if self.lo > -INF:
            bounds.append(f"{'>' if self.lo_open else '>='} {lo}")
        if self.hi < INF:
            bounds.append(f"{'<' if self.hi_open else '<='} {hi}")
        text = f"{kind} {' and '.join(bounds)}".rstrip()
        if self.lo > -INF and self.hi < INF:
            text = f"{kind} in {'(' if self.lo_open else '['}{lo}, {hi}{')' if self.hi_open else ']'}"
        extras = [repr(w) for w in self.words] + ([f"null ({self.null})"] if self.null is not None else [])
        return text + (f", or {' or '.join(extras)}" if extras else "")


def _num(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and float(x).is_integer() else f"{x:g}"


def Int(lo: float = 0, hi: float = INF, **kw) -> Num:  # noqa: N802 - reads as a type in the table
    return Num(lo, hi, integer=True, **kw)


def Real(lo: float = -INF, hi: float = INF, **kw) -> Num:  # noqa: N802
    return Num(lo, hi, **kw)


POSITIVE = Real(0, lo_open=True)
NON_NEGATIVE = Real(0)
UNIT = Real(0, 1)  # a share, a probability, a mixing weight
SEED = Int(0, 2**32 - 1)

# key pattern -> accepted values; first match wins. Ranges are the ones the methods are defined on (the docs of
# each method give the meaning); a value the code would silently turn into NaN scores, empty memories or Python
# slicing from the end is outside them.
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
    # ---- data, model, shift, trainer, logger, post-hoc groups
    ("data.subset", Int(1, null="every test pair")),
    ("data.num_frames", Int(1)),
    ("data.workers", Int(0)),
    ("data.synth.n_test", Int(1)),
    ("data.synth.n_train", Int(1)),
    ("data.synth.n_val", Int(0)),
    ("data.synth.captions_per_train_video", Int(1)),
    ("data.synth.seed", SEED),
    ("data.synth.min_events", Int(3)),  # seg-mismatch needs three events
    ("data.synth.max_events", Int(3)),
    ("data.synth.frames_per_event", Int(2)),
    ("comp_probe.subset", Int(2, null="every video of the split")),
    ("comp_probe.seed", SEED),
    ("model.vision.mlp_ratio", POSITIVE),
    ("model.*", Int(1)),  # widths, depths, sizes of the embedded towers
    ("shift.severity", Int(0)),  # the range of each shift is checked against its registry entry
    ("shift.options.severity", Int(0)),
    ("shift.options.severities[]", Int(0)),
    ("shift.options.filter_threshold", UNIT),
    ("shift.options.filter_max_tries", Int(1)),
    ("shift.options.pool_size", Int(1)),
    ("shift.options.ratio", Real(0, 1, lo_open=True)),
    ("shift.options.threads", Int(1)),
    ("shift.options.flow_scale", Real(0, 1, lo_open=True)),
    ("shift.options.top_k", Int(1, 50)),
    ("shift.options.min_similarity", Real(0, 1, lo_open=True, null="no D_q filter")),
    ("trainer.devices", Int(1, words=("auto",))),
    ("trainer.num_nodes", Int(1)),
    ("trainer.log_every_n_steps", Int(1)),
    ("logger.log_every", Int(1)),
    ("posthoc.k", Int(1)),
    ("posthoc.beta", POSITIVE),
    ("posthoc.inv_temp", POSITIVE),
    # ---- adapters (conf/adapter/*.yaml)
    ("adapter.method.steps", Int(1)),
    ("adapter.method.lr", NON_NEGATIVE),
    ("adapter.method.lr.*", NON_NEGATIVE),
    ("adapter.method.weight_decay", NON_NEGATIVE),
    ("adapter.method.betas[]", Real(0, 1, hi_open=True)),
    ("adapter.method.temperature", POSITIVE),
    ("adapter.method.momentum", UNIT),
    ("adapter.method.ema_momentum", UNIT),
    ("adapter.method.quantile", Real(0, 1, lo_open=True)),
    ("adapter.method.ratio", UNIT),
    ("adapter.method.margin_scale", POSITIVE),
    ("adapter.method.margin_value", Real(0, lo_open=True, null="the preset")),
    ("adapter.method.d_margin", NON_NEGATIVE),
    ("adapter.method.fisher_beta", NON_NEGATIVE),
    ("adapter.method.fisher_size", Int(1)),
    ("adapter.method.fisher_batch_size", Int(1)),
    ("adapter.method.gamma", Real(0, 1, lo_open=True)),
    ("adapter.method.balance_weight", NON_NEGATIVE),
    ("adapter.method.rho", POSITIVE),
    ("adapter.method.reset_threshold", NON_NEGATIVE),
    ("adapter.method.top_blocks[]", Int(0)),
    ("adapter.method.queue_size", Int(1)),
    ("adapter.method.update_batches", Int(0)),
    ("adapter.method.uni_t", POSITIVE),
    ("adapter.method.hsm.alpha", POSITIVE),
    ("adapter.method.hsm.beta", POSITIVE),
    ("adapter.method.hsm.m", UNIT),
    ("adapter.method.hsm.capacity", Int(1, null="unbounded", words=("gallery_fraction",))),
    ("adapter.method.hsm.gallery_fraction", Real(0, 1, lo_open=True)),
    ("adapter.method.rm.size", Int(1)),
    ("adapter.method.rm.size_overrides.*", Int(1)),
    ("adapter.method.rm.ratio", UNIT),
    ("adapter.method.na.eps", POSITIVE),
    ("adapter.method.loss.uni_t", POSITIVE),
    ("adapter.method.loss.hub_k", Int(1)),
    ("adapter.method.gate.k", Int(1)),
    ("adapter.method.gate.threshold", POSITIVE),
    ("adapter.method.guard.k", Int(1)),
    ("adapter.method.guard.warmup", Int(1)),
    ("adapter.method.guard.margin", NON_NEGATIVE),
    ("adapter.method.guard.agreement", UNIT),
    ("adapter.method.guard.ema", Real(0, 1, lo_open=True)),
    ("adapter.method.guard.max_rollbacks", Int(1)),
    ("adapter.method.*w_*", NON_NEGATIVE),  # loss weights: 0 switches a term off
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
    ("pretrain_corpus.n_images", Int(1)),
    ("pretrain_corpus.size", Int(8)),
    ("pretrain_corpus.seed", SEED),
    ("severities[]", Int(0)),
    ("video_index", Int(0)),
    # ---- the SLURM launcher (conf/hydra/launcher/slurm.yaml)
    ("hydra.launcher.timeout_min", Int(1)),
    ("hydra.launcher.mem_gb", Int(1)),
    ("hydra.launcher.*", Int(1)),  # nodes, GPUs, tasks, CPUs, array parallelism
)


def rule_for(key: str, value: Any = 0) -> Num | None:
    """The rule of a dotted key (list items as ``key[]``), or None when no pattern matches. A wildcard pattern
    judges numbers only (``model.*`` covers the tower sizes, not ``model.name``); an exact key judges any value.
    ``gallery_shift.*`` takes the values of ``shift.*`` (the same shift configs)."""
    if key.startswith("gallery_shift."):
        key = key[len("gallery_"):]
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


RELATIONS: tuple[Callable[[dict], str | None], ...] = (_hubness_k_below_gallery, _events_range, _text_trunk_training,
                                                      _comp_chain, _text_pool, _adapter_keys)


def validate_config(cfg: Any) -> None:
    """Raise ConfigValueError for the first value outside its rule (or a broken relation between values)."""
    from omegaconf import DictConfig, OmegaConf

    plain = OmegaConf.to_container(cfg, resolve=True) if isinstance(cfg, DictConfig) else cfg
    plain = {k: v for k, v in plain.items() if k != "hydra"}
    for key, value in leaves(plain):
        rule = rule_for(key, value)
        if rule is not None and not rule.accepts(value):
            raise ConfigValueError(f"invalid value {key}={_show(value)}: expected {rule.describe()}")
    for relation in RELATIONS:
        if (problem := relation(plain)) is not None:
            raise ConfigValueError(f"invalid configuration: {problem}")


def _show(value: Any) -> str:
    if value is None:
        return "null"
    return repr(value) if isinstance(value, str) else str(value)
