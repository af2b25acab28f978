"""The adapter example of docs/adding-an-adapter.md (shown again in the README) composes and runs as written."""

from __future__ import annotations

import re
import shutil
import sys
import types
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def _block(text: str, lang: str, marker: str) -> str:
    return next(b for b in re.findall(rf"```{lang}\n(.*?)```", text, re.S) if marker in b)


def test_the_readme_shows_the_guide_example():
    readme, guide = (ROOT / "README.md").read_text(), (ROOT / "docs" / "adding-an-adapter.md").read_text()
    for lang, marker in (("python", "class EntMinAdapter"), ("yaml", "name: entmin")):
        assert _block(guide, lang, marker) in _block(readme, lang, marker)


@pytest.mark.heavy  # loads torch and the adapters
def test_the_guide_example_composes_adapts_and_resets(tmp_path, monkeypatch):
    from hydra import compose, initialize_config_dir
    from hydra.utils import instantiate

    from tta.adapters.base import QueryForward
    from tta.utils.config import CONF_DIR

    guide = (ROOT / "docs" / "adding-an-adapter.md").read_text()
    module = types.ModuleType("tta.adapters.entmin")
    exec(compile(_block(guide, "python", "class EntMinAdapter"), "entmin.py", "exec"), module.__dict__)  # noqa: S102
    monkeypatch.setitem(sys.modules, "tta.adapters.entmin", module)
    conf = shutil.copytree(CONF_DIR, tmp_path / "conf")
    (conf / "adapter" / "entmin.yaml").write_text(_block(guide, "yaml", "name: entmin"))
    with initialize_config_dir(str(conf), version_base="1.3"):
        cfg = compose("run", ["adapter=entmin"])
    adapter = instantiate(cfg.adapter.method, _convert_="all")
    assert type(adapter).__name__ == "EntMinAdapter" and adapter.steps == 1 and adapter.lr_cfg == 1e-5
    loss = adapter.adapt_loss(QueryForward(feats=torch.zeros(4, 8), sims=torch.randn(4, 10)), step=0)
    assert loss.ndim == 0 and torch.isfinite(loss) and adapter.seen == 4
    assert "seen" in adapter.resume_keys()
    adapter.reset_state()
    assert adapter.seen == 0


def test_the_guide_describes_every_hook_of_the_base():
    from tta.adapters.base import HOOKS

    guide = (ROOT / "docs" / "adding-an-adapter.md").read_text()
    table = guide[guide.index("## The hooks"):guide.index("A non-finite loss")]
    rows = re.findall(r"^\| `([^`]+)`(?: / `([^`]+)`)? \|", table, re.M)
    named = [name.split("(")[0] for row in rows for name in row if name]
    assert sorted(named) == sorted(HOOKS)


def test_the_guides_bound_is_enforced_up_front_and_when_built(monkeypatch):
    from tta.adapters.base import OnlineAdapter
    from tta.adapters.components.options import build_options
    from tta.utils.bounds import ConfigValueError
    from tta.utils.config_rules import validate_config

    guide = (ROOT / "docs" / "adding-an-adapter.md").read_text()
    module = types.ModuleType("tta.adapters.keep")
    monkeypatch.setitem(sys.modules, "tta.adapters.keep", module)  # where @dataclass looks the module up
    exec(compile(_block(guide, "python", "class KeepOptions"), "keep.py", "exec"), module.__dict__)  # noqa: S102

    class KeepAdapter(OnlineAdapter):  # named as the guide's paragraph says
        option_types = (module.KeepOptions,)

    module.KeepAdapter = KeepAdapter
    expected = "invalid value {}keep=1.5: expected a finite number in [0, 1]"
    assert expected.format("adapter.method.") in " ".join(guide.split())  # the line the paragraph shows
    with pytest.raises(ConfigValueError, match=re.escape(expected.format("adapter.method."))):
        validate_config({"adapter": {"name": "keep", "method": {"_target_": "tta.adapters.keep.KeepAdapter",
                                                                 "keep": 1.5}}})
    with pytest.raises(ConfigValueError, match=re.escape(expected.format(""))):
        build_options(module.KeepOptions, {"keep": 1.5})
    assert build_options(module.KeepOptions, {"keep": 0.5}).keep == 0.5
