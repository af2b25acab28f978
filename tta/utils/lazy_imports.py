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

One piece of import-time work is cached instead: ``transformers`` builds the map of where each of its names lives
by reading every model file's ``__all__`` (twice, for ``transformers`` and ``transformers.models``), on every
import. Its result depends only on the installed files, so it is kept in the cache directory under the installed
distribution's identity (its version and the ``RECORD`` of its files that its installer wrote); an editable or unrecorded install is
read as usual.

When one of the deferred packages is first imported, the package object is made as usual but its ``__init__`` does not run: it has
what those importers take, and runs the real ``__init__`` in place the first time anything else is asked of it, so
nothing changes for code that uses more. Submodules import as usual. Any surprise (an unexpected layout) leaves the
ordinary import alone; ``TTA_EAGER_IMPORTS=1`` turns every deferral off (tta/__init__.py).
"""

from __future__ import annotations

import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import json
import logging
import os
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tta.utils.paths import cache_root

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


class _Patched(importlib.abc.Loader):
    """Runs the module as its real loader does, then ``patch`` on it (before anything imports names from it)."""

    def __init__(self, real: importlib.abc.Loader, patch: Callable[[types.ModuleType], None]):
        self.real, self.patch = real, patch

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        self.real.exec_module(module)
        self.patch(module)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


class _Deferrer(importlib.abc.MetaPathFinder):
    """Finds each deferred package once, with the path finder's own spec and :class:`_DeferredInit` as its loader,
    and each patched module once, with :class:`_Patched`."""

    def __init__(self, deferrals: dict[str, Deferral], patches: dict[str, Callable[[types.ModuleType], None]]):
        self.deferrals, self.patches = deferrals, patches

    def find_spec(self, fullname, path, target=None):
        patch = self.patches.pop(fullname, None)
        if patch is not None:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Patched(spec.loader, patch)
                return spec
            return None
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


def _installed_identity(distribution: str) -> str | None:
    """The version and the digest of the installer's ``RECORD`` of an installed distribution; None for an editable
    or unrecorded install, whose files may change under the same identity."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
        direct = json.loads(dist.read_text("direct_url.json") or "{}")
        record = dist.read_text("RECORD")
    except (metadata.PackageNotFoundError, OSError, ValueError):
        return None
    if not record or (direct.get("dir_info") or {}).get("editable"):
        return None
    return f"{distribution} {dist.version} {hashlib.sha1(record.encode()).hexdigest()}"


def _cache_import_structure(module: types.ModuleType) -> None:
    """Wrap ``transformers.utils.import_utils.define_import_structure`` with a cache (the module docstring)."""
    real = getattr(module, "define_import_structure", None)
    identity = _installed_identity("transformers")
    if real is None or identity is None:
        return

    made: dict[str, dict] = {}  # the same object for the same call, as transformers' own lru_cache gives

    @functools.wraps(real)
    def cached(module_path, prefix=None):
        key = hashlib.sha1(f"{identity}\n{module_path}\n{prefix}".encode()).hexdigest()[:16]
        if key not in made:
            made[key] = _read_or_build(f"transformers-{key}.json", real, module_path, prefix)
        return made[key]

    module.define_import_structure = cached


def _read_or_build(name: str, real: Callable, module_path, prefix) -> dict:
    """The structure kept in the cache's ``imports/name``, else built by ``real`` and kept (where the cache can be
    written: an import never fails on the cache)."""
    try:
        file = cache_root() / "imports" / name
        return {frozenset(backends): {name: set(objects) for name, objects in modules.items()}
                for backends, modules in json.loads(file.read_text())}
    except (OSError, ValueError, TypeError, AttributeError):
        pass
    structure = real(module_path, prefix)
    try:
        file = cache_root() / "imports" / name
        blob = json.dumps([[sorted(b), {n: sorted(o) for n, o in m.items()}] for b, m in structure.items()])
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp = file.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(blob)
        os.replace(tmp, file)  # whole or absent for a concurrent reader
    except (OSError, TypeError, AttributeError):  # an unexpected shape or a read-only cache: not kept
        pass
    return structure


def patches() -> dict[str, Callable[[types.ModuleType], None]]:
    """The modules patched right after they run (the module docstring)."""
    return {"transformers.utils.import_utils": _cache_import_structure}


def defer_imports() -> None:
    """Defer the packages of :func:`deferrals` and patch the modules of :func:`patches` that are not imported yet
    (once per process)."""
    if any(isinstance(f, _Deferrer) for f in sys.meta_path):
        return
    pending = {name: d for name, d in deferrals().items() if name not in sys.modules}
    patching = {name: p for name, p in patches().items() if name not in sys.modules}
    if pending or patching:
        sys.meta_path.insert(0, _Deferrer(pending, patching))
