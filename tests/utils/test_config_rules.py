"""The config check before any work (tta/utils/config_rules.py) and the bounds it applies: every numeric option of
every shipped config has a bound, declared by its owner (tta/utils/bounds.py) or in the table of keys no project
class owns, every shipped combination passes, bad values are refused with one line naming key, value and range,
and an owner's bound refuses the same values up front and when its option dataclass is built."""

from __future__ import annotations

import math
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from tta.utils.bounds import BOUND, declared_bounds
from tta.utils.config import CONF_DIR, compose
from tta.utils.config_rules import (
    ConfigValueError,
    bound_for,
    leaves,
    locate_owner,
    owned_bounds,
    owner_nodes,
    rule_for,
    validate_config,
)

ADAPTERS = sorted(p.stem for p in (CONF_DIR / "adapter").glob("*.yaml"))


def _package(file: Path) -> str:
    """Where a config file's keys land in the composed config: its group (``hydra/launcher`` -> ``hydra.launcher``)
    unless it declares ``# @package _global_``."""
    if "@package _global_" in file.read_text().split("\n", 1)[0]:
        return ""
    return ".".join(file.relative_to(CONF_DIR).parent.parts)


def _placed(node: dict, package: str) -> dict:
    for part in reversed(package.split(".") if package else []):
        node = {part: node}
    return node


def _numeric(node: dict) -> list[tuple[str, object]]:
    return [(k, v) for k, v in leaves(node) if isinstance(v, (int, float)) and not isinstance(v, bool)
            and not k.startswith("hydra.sweeper.params")]


@pytest.fixture(scope="module")
def adapter_configs() -> dict[str, dict]:
    """Each adapter= choice composed alone (its shared blocks included), as plain containers."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from omegaconf import OmegaConf

    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return {a: OmegaConf.to_container(hydra_compose(f"adapter/{a}"), resolve=True) for a in ADAPTERS}


def _over(base: dict, top: dict) -> dict:
    """``top`` merged over ``base`` (what a config file changes in the run it is composed into)."""
    out = dict(base)
    for k, v in top.items():
        out[k] = _over(base[k], v) if isinstance(v, dict) and isinstance(base.get(k), dict) else v
    return out


def shipped_numeric_bounds(adapter_configs: dict[str, dict]) -> list[tuple[str, str, object, object]]:
    """(file, key, value, bound) of every numeric leaf of every shipped config. A file's owners are the
    ``_target_``s of the default run it changes (data/synth_b.yaml sets data.synth.* of the generator that run
    names) unless it names its own; the adapters' files (and the shared blocks they compose) are checked as each
    adapter= choice composes them, their owner being the method's ``_target_``."""
    from omegaconf import OmegaConf

    run = OmegaConf.to_container(compose("run"), resolve=True)
    out = []
    for file in sorted(CONF_DIR.rglob("*.yaml")):
        if file.relative_to(CONF_DIR).parts[0] == "adapter":
            continue
        node = yaml.safe_load(file.read_text()) or {}
        placed = _placed({k: v for k, v in node.items() if k != "defaults"}, _package(file))
        owned = owned_bounds(_over(run, placed))
        out += [(str(file.relative_to(CONF_DIR)), k, v, bound_for(k, v, owned)) for k, v in _numeric(placed)]
    for adapter, cfg in adapter_configs.items():
        owned = owned_bounds(cfg)
        out += [(f"adapter/{adapter}.yaml", k, v, bound_for(k, v, owned)) for k, v in _numeric(cfg)]
    return out


def test_every_numeric_option_of_every_shipped_config_has_a_bound_it_satisfies(adapter_configs):
    found = shipped_numeric_bounds(adapter_configs)
    assert len(found) > 200 and {f.split("/")[0] for f, *_ in found} >= {"adapter", "posthoc", "data", "model"}
    missing = sorted({f"{key} ({file})" for file, key, _, rule in found if rule is None})
    assert not missing, ("numeric options without a bound: declare it on the owner's option dataclass "
                         f"(docs/adding-an-adapter.md, Options), a shift's where it registers (docs/configuration.md) "
                         f"or, for a key no class owns, in RULES: {missing}")
    refused = [f"{key}={value} ({file})" for file, key, value, rule in found if not rule.accepts(value)]
    assert not refused, refused


@pytest.mark.heavy  # composes 30 configurations
@pytest.mark.parametrize("adapter", ADAPTERS)
def test_shipped_compositions_pass(adapter):
    for extra in ([], ["task=t2v", "model=xpool", "data=msrvtt", "posthoc=qbnorm"], ["debug=tiny", "scenario=continual"]):
        validate_config(compose("run", [f"adapter={adapter}", *extra]))


@pytest.mark.parametrize("override, message", [
    ("adapter.method.hsm.alpha=nan", "invalid value adapter.method.hsm.alpha=nan: expected a finite number > 0"),
    ("data.subset=-5", "invalid value data.subset=-5: expected an integer >= 1, or null (every test pair)"),
    ("data.subset=2.5", "invalid value data.subset=2.5: expected an integer >= 1"),
    ("batch_size=0", "invalid value batch_size=0: expected an integer >= 1"),
    ("batch_size=abc", "invalid value batch_size='abc': expected an integer >= 1"),
    ("adapter.method.lr.v2t=-1e-4", "invalid value adapter.method.lr.v2t=-0.0001: expected a finite number >= 0"),
    ("adapter.method.temperature=inf", "invalid value adapter.method.temperature=inf: expected a finite number > 0"),
    ("adapter.method.hsm.m=1.5", "invalid value adapter.method.hsm.m=1.5: expected a finite number in [0, 1]"),
    ("adapter.method.rm.size=0", "invalid value adapter.method.rm.size=0: expected an integer >= 1"),
    ("adapter.method.betas=[0.9,1.0]", "invalid value adapter.method.betas[]=1.0: expected a finite number in [0, 1)"),
    ("adapter.method.loss.w_na=-1", "invalid value adapter.method.loss.w_na=-1: expected a finite number >= 0"),
    ("seed=-1", "invalid value seed=-1: expected an integer in [0, 4294967295]"),
    ("shift.severity=true", "invalid value shift.severity=True: expected an integer >= 0"),
    ("model.vision.mlp_ratio=0", "invalid value model.vision.mlp_ratio=0: expected a finite number > 0"),
    ("model.vision.width=2.5", "invalid value model.vision.width=2.5: expected an integer >= 1"),
    ("shift=swap_text task=t2v shift.options.top_k=51",
     "invalid value shift.options.top_k=51: expected an integer in [1, 50]"),
    ("shift=mixed_types shift.options.ratio=0", "invalid value shift.options.ratio=0: expected a finite number in (0, 1]"),
    ("shift@gallery_shift=motion_blur task=t2v shift=char_swap gallery_shift.options.flow_scale=1.5",
     "invalid value gallery_shift.options.flow_scale=1.5: expected a finite number in (0, 1]"),
    ("hubness.k=50 data.subset=20", "invalid configuration: hubness.k=50 must be smaller than the gallery size "
                                    "(data.subset=20); use a larger data.subset or hubness.k <= 19"),
    ("+adapter.steps=3", "invalid configuration: adapter.steps is read by nothing: an adapter's options are under "
                         "adapter.method (adapter.method.steps=...;"),
    ("+trainer.limit_test_batches=2", "invalid configuration: trainer.limit_test_batches=2 would end the query "
                                      "stream before its last batch, and a run is scored on every query: stream "
                                      "fewer queries with data.subset=N"),
])
def test_invalid_values_are_refused_with_one_line(override, message):
    with pytest.raises(ConfigValueError) as err:
        validate_config(compose("run", ["adapter=hatvtr", *override.split()]))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_run_streams_every_batch_lightning_would_give_it():
    """Lightning's batch limits: an int is a number of batches (1 is one batch), a float a share (1.0 is all)."""
    from tta.utils.config_rules import _partial_stream

    def refused(**trainer) -> str | None:
        return _partial_stream({"adapter": {"name": "tent"}, "trainer": trainer})

    for fine in ({}, {"limit_test_batches": 1.0}, {"fast_dev_run": False}, {"fast_dev_run": 0}):
        assert refused(**fine) is None, fine
    for key, value in (("limit_test_batches", 0.5), ("limit_test_batches", 1), ("fast_dev_run", True),
                       ("fast_dev_run", 3)):
        assert refused(**{key: value}).startswith(f"trainer.{key}={value} would end the query stream")
    assert _partial_stream({"trainer": {"limit_test_batches": 2}}) is None  # not a run: the training entry point


def test_bound_edges():
    from tta.adapters.components.hsm import HSMConfig

    rule = declared_bounds(HSMConfig)["hsm.gallery_fraction"]
    assert rule.accepts(1.0) and not rule.accepts(0.0) and not rule.accepts(math.nan)
    assert rule_for("model.name", "clip4clip") is None and rule_for("model.embed_dim", 0) is None  # the towers'
    assert rule_for("data.subset").accepts(None) and rule_for("data.subset").accepts(3.0)
    assert not rule_for("batch_size").accepts(None)
    assert rule_for("adapter.method.hsm.alpha") is None  # the adapters' bounds are their own, not the table's


def _option_types(owner: type) -> list[type]:
    return [t for cls in reversed(owner.__mro__) for t in vars(cls).get("option_types", ())]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_owner_bound_refuses_the_same_values_up_front_and_when_its_dataclass_is_built(adapter, adapter_configs):
    """Every bound an adapter (or its refiner) declares for a key its config sets: a NaN there is refused by the
    run's check and by the option dataclass built directly, in the same words (the run's line names the key from
    the config's root)."""
    cfg = adapter_configs[adapter]
    checked = set()
    for path, target in owner_nodes(cfg):
        node = cfg
        for part in path.split("."):
            node = node[part]
        for options in _option_types(locate_owner(target)):
            block = node.get(options.block, {}) if options.block else node
            given = {f.name: block[f.name] for f in fields(options) if f.name in block}
            for f in fields(options):
                if BOUND not in f.metadata or f.name not in given:
                    continue
                key = f"{path}.{options.block}.{f.name}" if options.block else f"{path}.{f.name}"
                with pytest.raises(ConfigValueError) as up_front:
                    validate_config(_set(cfg, key, math.nan))
                with pytest.raises(ConfigValueError) as built:
                    options(**{**given, f.name: math.nan})
                assert str(up_front.value) == f"invalid value {key}=nan: expected {f.metadata[BOUND].describe()}"
                assert str(up_front.value) == str(built.value).replace("invalid value ", f"invalid value {path}.")
                checked.add(key)
    numeric = {k for k, v in leaves(cfg) if isinstance(v, (int, float)) and not isinstance(v, bool)}
    unchecked = [n for n in numeric if not any(n == k or n.startswith((f"{k}.", f"{k}[")) for k in checked)]
    assert not unchecked, unchecked  # every numeric option of the adapter's config went through both paths
    assert checked or adapter == "source"


def _set(cfg: dict, key: str, value) -> dict:
    import copy

    out = copy.deepcopy(cfg)
    node = out
    *parents, last = key.split(".")
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value
    return out


def test_a_bad_value_of_a_key_no_class_owns_is_answered_before_torch_loads():
    """The table's keys are checked before the owners are imported (an adapter's module loads torch and Lightning)."""
    import subprocess
    import sys

    code = ("import sys\nfrom tta.utils.config import compose\nfrom tta.utils.config_rules import validate_config\n"
            "try:\n    validate_config(compose('run', ['adapter=hatvtr', 'batch_size=0']))\n"
            "except ValueError as e:\n    print(e)\nprint('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.stdout.splitlines() == ["invalid value batch_size=0: expected an integer >= 1", "False"], out.stderr


def _shift_bounds() -> list[tuple[str, str, object]]:
    from tta.shifts import option_bounds, text_shift_names, video_shift_names
    from tta.shifts.video.mixed import MIXED_NAMES

    return [(name, key, rule) for name in [*video_shift_names(), *text_shift_names(), *MIXED_NAMES]
            for key, rule in option_bounds(name).items()]


def test_a_shift_option_is_checked_against_the_bound_its_shift_declares_up_front_and_when_the_shift_runs():
    """Each bound a shift declares where it registers refuses a NaN for that shift's option, as ``shift`` and as
    ``gallery_shift``, and the registry's check of a shift's options refuses it in the same words."""
    from tta.shifts.registry import check_bounds, check_options
    from tta.shifts.video.mixed import MIXED_NAMES

    found = _shift_bounds()
    assert {k for _, k, _ in found} >= {"severity", "severities", "filter_threshold", "filter_max_tries", "pool_size",
                                        "ratio", "threads", "flow_scale", "top_k"}
    for name, key, rule in found:
        for node in ("shift", "gallery_shift"):
            with pytest.raises(ConfigValueError) as up_front:
                validate_config({node: {"name": name, "severity": 1, "options": {key: math.nan}}})
            assert str(up_front.value) == f"invalid value {node}.options.{key}=nan: expected {rule.describe()}"
        if name not in MIXED_NAMES:  # a stream of shifts runs its components' checks, not its own
            with pytest.raises(ConfigValueError) as run:
                check_bounds(name, {key: math.nan})
            assert str(up_front.value) == str(run.value).replace("invalid value ", "invalid value gallery_shift.")
            with pytest.raises(ValueError):  # after the shift's own check (a model path, a flow method), if any
                check_options(name, {key: math.nan})


def test_a_shift_bound_belongs_to_the_shift_that_declares_it():
    """An option bounded by one shift is not judged under another (swap_text caps top_k at its neighbour pool, the
    model-based style shifts sample from any top_k), and a word a shift accepts passes."""
    validate_config({"shift": {"name": "formal", "severity": 1, "options": {"top_k": 80}}})
    with pytest.raises(ConfigValueError):
        validate_config({"shift": {"name": "swap_text", "severity": 1, "options": {"top_k": 80}}})
    validate_config({"shift": {"name": "mixed_types", "severity": 0, "options": {"severity": "mixed", "ratio": 0.4}}})


def test_a_tower_bound_refuses_the_same_value_up_front_and_when_the_tower_config_is_built():
    """The towers' sizes are declared on TowerConfig, the class tta/models/factory.py builds from ``model``."""
    from tta.models.towers import TowerConfig

    vision = {**TowerConfig().vision, "mlp_ratio": 0}
    with pytest.raises(ConfigValueError) as built:
        TowerConfig(vision=vision)
    with pytest.raises(ConfigValueError) as up_front:
        validate_config(compose("run", ["adapter=source", "model.vision.mlp_ratio=0"]))
    assert str(up_front.value) == str(built.value).replace("invalid value ", "invalid value model.")
    assert str(built.value) == "invalid value vision.mlp_ratio=0: expected a finite number > 0"
