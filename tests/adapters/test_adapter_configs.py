"""conf/adapter/ composes its shared blocks (conf/adapter/_shared/) instead of copying them: the protocol defaults and
the HSM block are written once, every method yaml gets them through its defaults list, and the fragments are no
``adapter=`` choice."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from hydra.errors import MissingConfigException
from omegaconf import OmegaConf

from tta.utils.config import CONF_DIR, compose

ADAPTER_DIR = Path(CONF_DIR) / "adapter"
SHARED = ADAPTER_DIR / "_shared"
METHODS = sorted(p.stem for p in ADAPTER_DIR.glob("*.yaml"))


def _own(path: Path) -> dict:
    """The keys a yaml file writes itself (its defaults list aside)."""
    node = yaml.safe_load(path.read_text()) or {}
    node.pop("defaults", None)
    return node


def _shared(name: str) -> dict:
    return _own(SHARED / f"{name}.yaml")


def test_no_method_yaml_repeats_the_hsm_block():
    hsm_keys = set(_shared("hsm"))
    for path in sorted(ADAPTER_DIR.rglob("*.yaml")):
        if path.parent == SHARED:
            continue
        method = _own(path).get("method") or {}
        repeated = hsm_keys & set(method.get("hsm") or {})
        assert not repeated, f"{path.name} repeats HSM keys {sorted(repeated)} of _shared/hsm.yaml"


def _composed_defaults(name: str) -> dict:
    """The shared method-level defaults ``name.yaml`` composes (its ``_shared/<block>@method`` and their own)."""
    blocks = [e.split("/")[1].split("@")[0] for e in yaml.safe_load((ADAPTER_DIR / f"{name}.yaml").read_text())
              .get("defaults", []) if isinstance(e, str) and e.startswith("_shared/") and e.endswith("@method")]
    values: dict = {}
    while blocks:
        block = blocks.pop()
        values.update(_shared(block))
        blocks += [e for e in yaml.safe_load((SHARED / f"{block}.yaml").read_text()).get("defaults", []) if e != "_self_"]
    return values


def test_no_method_yaml_repeats_a_shared_default():
    for name in METHODS:
        shared = _composed_defaults(name)
        method = _own(ADAPTER_DIR / f"{name}.yaml").get("method") or {}
        same = sorted(k for k, v in method.items() if k in shared and v == shared[k])
        assert not same, f"{name}.yaml repeats the shared defaults {same}: drop them (they come from _shared/)"


@pytest.mark.parametrize("name", ["hsm", "hatvtr"])
def test_hsm_adapters_compose_the_one_hsm_block(name):
    method = compose("run", [f"adapter={name}"]).adapter.method
    assert OmegaConf.to_container(method.hsm) == _shared("hsm")


@pytest.mark.parametrize("name,block", [("tent", "entropy"), ("eata", "entropy"), ("sar", "entropy"),
                                        ("read", "entropy"), ("tcr", "protocol"), ("hatvtr", "protocol")])
def test_trainable_adapters_compose_the_protocol(name, block):
    method = OmegaConf.to_container(compose("run", [f"adapter={name}"]).adapter.method)
    expected = {**_shared("reset"), **_shared("protocol"), **(_shared("entropy") if block == "entropy" else {})}
    assert expected == _composed_defaults(name)
    own = _own(ADAPTER_DIR / f"{name}.yaml")["method"]
    for key, value in expected.items():  # the shared value unless the method file sets its own (e.g. lr)
        assert method[key] == own.get(key, value), f"adapter={name}: method.{key}"
    assert method["_target_"].startswith(f"tta.adapters.{name}.")


def test_shared_fragments_are_no_adapter_choice():
    with pytest.raises(MissingConfigException) as info:
        compose("run", ["adapter=not_a_method"])
    listed = str(info.value).split("Available options in 'adapter':")[1].split("Config search path")[0].split()
    assert listed == METHODS
    assert "_shared" not in METHODS and {"source", "hsm", "hatvtr", "tent"} <= set(METHODS)
