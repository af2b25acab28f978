"""The configuration rule table (tta/utils/config_rules.py): every numeric option of every shipped config has a
rule, every shipped combination passes, and bad values are refused with one line naming key, value and range."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from tta.utils.config import CONF_DIR, compose
from tta.utils.config_rules import ConfigValueError, leaves, rule_for, validate_config

ADAPTERS = sorted(p.stem for p in (CONF_DIR / "adapter").glob("*.yaml"))


def _package(file: Path) -> str:
    """Where a config file's keys land in the composed config: its group (``hydra/launcher`` -> ``hydra.launcher``)
    unless it declares ``# @package _global_``."""
    if "@package _global_" in file.read_text().split("\n", 1)[0]:
        return ""
    if file.parent.name == "_shared":  # adapter fragments, composed into adapter.method (the HSM block into .hsm)
        return "adapter.method.hsm" if file.stem == "hsm" else "adapter.method"
    return ".".join(file.relative_to(CONF_DIR).parent.parts)


def shipped_numeric_leaves() -> list[tuple[str, str, object]]:
    out = []
    for file in sorted(CONF_DIR.rglob("*.yaml")):
        node = yaml.safe_load(file.read_text()) or {}
        node = {k: v for k, v in node.items() if k != "defaults"}
        pkg = _package(file)
        for key, value in leaves(node, pkg):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and not key.startswith(
                    "hydra.sweeper.params"):
                out.append((str(file.relative_to(CONF_DIR)), key, value))
    return out


def test_every_numeric_option_of_every_shipped_config_has_a_rule_it_satisfies():
    found = shipped_numeric_leaves()
    assert len(found) > 200 and {f.split("/")[0] for f, _, _ in found} >= {"adapter", "shift", "data", "model"}
    missing = sorted({f"{key} ({file})" for file, key, value in found if rule_for(key, value) is None})
    assert not missing, f"numeric options without a rule in tta/utils/config_rules.py RULES: {missing}"
    refused = [f"{key}={value} ({file})" for file, key, value in found if not rule_for(key, value).accepts(value)]
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
    ("hubness.k=50 data.subset=20", "invalid configuration: hubness.k=50 must be smaller than the gallery size "
                                    "(data.subset=20); use a larger data.subset or hubness.k <= 19"),
    ("+adapter.steps=3", "invalid configuration: adapter.steps is read by nothing: an adapter's options are under "
                         "adapter.method (adapter.method.steps=...;"),
])
def test_invalid_values_are_refused_with_one_line(override, message):
    with pytest.raises(ConfigValueError) as err:
        validate_config(compose("run", ["adapter=hatvtr", *override.split()]))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_rule_edges():
    (rule,) = {rule_for("adapter.method.hsm.gallery_fraction")}
    assert rule.accepts(1.0) and not rule.accepts(0.0) and not rule.accepts(math.nan)
    assert rule_for("model.name", "clip4clip") is None and rule_for("model.embed_dim", 0) is not None
    assert rule_for("data.subset").accepts(None) and rule_for("data.subset").accepts(3.0)
    assert not rule_for("batch_size").accepts(None)
