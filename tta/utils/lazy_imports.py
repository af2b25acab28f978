"""Import-time work the run does not need, deferred to the first use of what it imports (benchmarks/startup.py).

* ``torchmetrics``: Lightning checks its ``__version__`` and takes ``Metric`` / ``MetricCollection`` from it; its
  ``__init__`` meanwhile imports every metric family (torchvision, transformers, scipy.signal).
* ``torchvision`` and ``torchvision.models``: open_clip takes its transforms and one layer from
  ``torchvision.ops``, timm's layers the feature extractor of ``torchvision.models``; the two ``__init__`` import
  every dataset and model definition. torchvision's C extension and operator registrations still load first, as
  in its real ``__init__``.
* ``timm``: open_clip takes a few layers from ``timm.layers`` for its timm towers, and ``timm``'s ``__init__``
  imports every timm model and, through its utilities, wandb (which is therefore not imported either; wandb itself
  is never deferred: its own modules read its ``__init__``'s names while it imports).

When one of them is first imported, the package object is made as usual but its ``__init__`` does not run: it has
what those importers take, and runs the real ``__init__`` in place the first time anything else is asked of it, so
nothing changes for code that uses more. Submodules import as usual. Any surprise (an unexpected layout) leaves the
ordinary import alone; ``TTA_EAGER_IMPORTS=1`` turns every deferral off (tta/__init__.py).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import logging
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

_TORCHMETRICS_LIGHT = {"Metric": "torchmetrics.metric", "MetricCollection": "torchmetrics.collections"}


@dataclass
class Deferral:
    """How one package is deferred.

    Attributes:
        light: names served without the real ``__init__`` (each made by its callable on first use).
        prepare: fills in what the real ``__init__`` defines before its imports and its submodules read back.
        on_load: called just before the real ``__init__`` runs.
    """

    light: dict[str, Callable[[], Any]] = field(default_factory=dict)
    prepare: Callable[[types.ModuleType], None] | None = None
    on_load: Callable[[], None] | None = None


class _DeferredInit(importlib.abc.Loader):
    """Makes the package object; its real loader runs ``__init__`` on the first other name asked of it."""

    def __init__(self, real: importlib.abc.Loader, deferral: Deferral, made: Callable[[], None]):
        self.real, self.deferral, self.made = real, deferral, made

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        deferral, real = self.deferral, self.real
        self.made()  # once: imported again (after leaving sys.modules), it is an ordinary package

        def load_all() -> None:
            del module.__getattr__
            module.__loader__ = module.__spec__.loader = real
            if deferral.on_load is not None:
                deferral.on_load()
            real.exec_module(module)  # the real __init__, in this same module object

        def __getattr__(attr: str):
            if attr in deferral.light:
                value = deferral.light[attr]()
                setattr(module, attr, value)
                return value
            if attr.startswith("__") and attr.endswith("__"):
                raise AttributeError(attr)
            if importlib.machinery.PathFinder.find_spec(f"{module.__name__}.{attr}", module.__path__) is not None:
                return importlib.import_module(f"{module.__name__}.{attr}")  # a submodule (``from . import x``)
            load_all()
            return getattr(module, attr)

        if deferral.prepare is not None:
            deferral.prepare(module)
        module.__getattr__ = __getattr__

    def __getattr__(self, name: str):  # resource readers and the like: the real loader's
        return getattr(self.real, name)


class _Deferrer(importlib.abc.MetaPathFinder):
    """Finds each deferred package once, with the path finder's own spec and :class:`_DeferredInit` as its loader."""

    def __init__(self, deferrals: dict[str, Deferral]):
        self.deferrals = deferrals

    def find_spec(self, fullname, path, target=None):
        deferral = self.deferrals.get(fullname)  # kept until its module is made: find_spec alone imports nothing
        if deferral is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if (spec is None or spec.loader is None or not spec.submodule_search_locations or not spec.has_location
                or not hasattr(spec.loader, "exec_module")):
            return None  # not an ordinary package on disk: imported as usual
        spec.loader = _DeferredInit(spec.loader, deferral, lambda: self.deferrals.pop(fullname, None))
        return spec


def _torchmetrics() -> Deferral:
    handler = logging.StreamHandler()

    def prepare(module: types.ModuleType) -> None:
        # what the real __init__ defines before its imports, and its submodules read back (torchmetrics.utilities.prints)
        logger = logging.getLogger("torchmetrics")
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        module._logger, module._PACKAGE_ROOT = logger, os.path.dirname(module.__file__)
        module._PROJECT_ROOT = os.path.dirname(module._PACKAGE_ROOT)
        module.__version__ = importlib.import_module("torchmetrics.__about__").__version__

    def light_class(attr: str) -> Callable[[], Any]:
        def make():
            importlib.import_module("torchmetrics.utilities")  # first, as the real __init__ does (circular imports)
            return getattr(importlib.import_module(_TORCHMETRICS_LIGHT[attr]), attr)
        return make

    return Deferral({k: light_class(k) for k in _TORCHMETRICS_LIGHT}, prepare,
                    on_load=lambda: logging.getLogger("torchmetrics").removeHandler(handler))  # it adds its own


def _torchvision() -> Deferral:
    def prepare(module: types.ModuleType) -> None:
        for name in ("extension", "_autograd_registrations", "_meta_registrations"):  # the real __init__'s order
            importlib.import_module(f"torchvision.{name}")

    return Deferral({"__version__": lambda: importlib.import_module("torchvision.version").__version__}, prepare)


def deferrals() -> dict[str, Deferral]:
    """The packages of the module docstring and how each is deferred."""
    return {"torchmetrics": _torchmetrics(), "torchvision": _torchvision(), "torchvision.models": Deferral(),
            "timm": Deferral()}


def defer_imports() -> None:
    """Defer the packages of :func:`deferrals` that are not imported yet (once per process)."""
    if any(isinstance(f, _Deferrer) for f in sys.meta_path):
        return
    pending = {name: d for name, d in deferrals().items() if name not in sys.modules}
    if pending:
        sys.meta_path.insert(0, _Deferrer(pending))
