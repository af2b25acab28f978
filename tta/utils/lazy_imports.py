"""Import-time work the run does not need, deferred to the first use of what it imports (benchmarks/startup.py).

* ``torchmetrics``: Lightning checks its ``__version__`` and takes ``Metric`` / ``MetricCollection`` from it; its
  ``__init__`` meanwhile imports every metric family (torchvision, transformers, scipy.signal).
* ``torchvision``, ``torchvision.models`` and ``torchvision.ops``: open_clip takes its transforms and one layer from
  ``torchvision.ops.misc``, timm's layers the feature extractor of ``torchvision.models``; the ``__init__`` files
  import every dataset, model and operator definition (the operators load dynamo's utilities). torchvision's C
  extension and operator registrations still load first, as in its real ``__init__``.
* ``timm``: open_clip takes a few layers from ``timm.layers`` for its timm towers, and ``timm``'s ``__init__``
  imports every timm model and, through its utilities, wandb (which is therefore not imported either; wandb itself
  is never deferred: its own modules read its ``__init__``'s names while it imports).

``torch._dynamo``, which a run that compiles nothing and builds no optimizer never uses: Lightning
takes ``OptimizedModule`` from it only to recognise compiled modules, and Lightning and transformers decorate
functions with it at import (``disable``, ``allow_in_graph``, ``assume_constant_result``). While the modules of
:func:`stand_ins` run, ``torch._dynamo`` is a stand-in: its ``OptimizedModule`` answers ``isinstance`` with the
real class once dynamo is loaded (nothing can be compiled before), ``disable`` gives a wrapper that calls the
function as it is until dynamo is loaded and its disabled version from then on, and ``allow_in_graph`` marks are
made in dynamo's registry when it loads. Any other name loads the real package and is its; every other import is
the ordinary one. (torch's optimizers load dynamo when they are built, so an adapter that updates weights loads it.)

Names served later (:func:`served_later`): some modules of transformers, torchmetrics and Lightning import, at
their top, names of large packages that only tensor-parallel or FSDP loading, detection losses, flex attention,
metric plots or FLOP counts use: torch's distributed tensors (which import sympy), scipy.optimize, matplotlib, flex
attention, triton. While such a module runs, its ``from source import names`` gets, for each name, a stand-in class
that imports ``source`` and forwards to the real object the first time it is called or asked for an attribute;
until then, nothing can be an instance of the real class, so ``isinstance`` answers False without loading it.
``ftfy`` (the text repair of CLIP's own tokenizer, which the embedded model's BERT tokenizer does not use) is
deferred like the packages above.

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

import builtins
import contextlib
import functools
import hashlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
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
    """Runs the module as its real loader does, inside ``around`` where given, then ``patch`` on it where given
    (before anything imports names from it)."""

    def __init__(self, real: importlib.abc.Loader, patch: Callable[[types.ModuleType], None] | None = None,
                 around: Callable[[types.ModuleType], contextlib.AbstractContextManager] | None = None):
        self.real, self.patch, self.around = real, patch, around

    def create_module(self, spec):
        return self.real.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        with self.around(module) if self.around is not None else contextlib.nullcontext():
            self.real.exec_module(module)
        if self.patch is not None:
            self.patch(module)

    def __getattr__(self, name: str):
        return getattr(self.real, name)


class _Deferrer(importlib.abc.MetaPathFinder):
    """Finds each deferred package once, with the path finder's own spec and :class:`_DeferredInit` as its loader,
    and each patched module once, with :class:`_Patched`."""

    def __init__(self, deferrals: dict[str, Deferral], patches: dict[str, Callable[[types.ModuleType], None]],
                 around: dict[str, Callable[[types.ModuleType], contextlib.AbstractContextManager]],
                 later: frozenset[str] = frozenset()):
        self.deferrals, self.patches, self.around, self.later = deferrals, patches, around, later

    def find_spec(self, fullname, path, target=None):
        patch, around = self.patches.pop(fullname, None), self.around.pop(fullname, None)
        if _served_to(fullname, self.later):
            around = _serving_later if around is None else _inside(around, _serving_later)
        if patch is not None or around is not None:
            spec = importlib.machinery.PathFinder.find_spec(fullname, path)
            if spec is not None and hasattr(spec.loader, "exec_module"):
                spec.loader = _Patched(spec.loader, patch, around)
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
            "torchvision.ops": Deferral(), "timm": Deferral(), "ftfy": Deferral()}


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


_DYNAMO = "torch._dynamo"
_ALLOWED_IN_GRAPH: list[Callable] = []  # functions marked while dynamo was not loaded; marked again once it is


def _loaded_dynamo() -> types.ModuleType | None:
    return sys.modules.get(_DYNAMO)


class _CompiledCheck(type):
    """``isinstance`` and ``issubclass`` against dynamo's ``OptimizedModule`` once dynamo is loaded: no module can
    be compiled before."""

    def __instancecheck__(cls, obj) -> bool:
        real = getattr(_loaded_dynamo(), "OptimizedModule", None)
        return real is not None and isinstance(obj, real)

    def __subclasscheck__(cls, sub) -> bool:
        real = getattr(_loaded_dynamo(), "OptimizedModule", None)
        return real is not None and issubclass(sub, real)


class OptimizedModule(metaclass=_CompiledCheck):
    """Stands for ``torch._dynamo.OptimizedModule`` (the module docstring)."""


class TransformGetItemToIndex:
    """Stands for dynamo's mode of that name: making one makes the real one (transformers enters it only to build
    masks with ``vmap``)."""

    def __new__(cls, *args, **kwargs):
        real = importlib.import_module(f"{_DYNAMO}._trace_wrapped_higher_order_op")
        return real.TransformGetItemToIndex(*args, **kwargs)


def _disable_once_loaded(fn=None, recursive=True, *, reason=None):
    """``torch.compiler.disable`` that leaves dynamo unloaded: ``fn`` as it is until dynamo is loaded (nothing can
    compile it before), its disabled version from then on."""
    if fn is None:
        return functools.partial(_disable_once_loaded, recursive=recursive, reason=reason)
    disabled = []

    @functools.wraps(fn)
    def call(*args, **kwargs):
        dynamo = _loaded_dynamo()
        if dynamo is None:
            return fn(*args, **kwargs)
        if not disabled:
            disabled.append(dynamo.disable(fn, recursive, reason=reason))
        return disabled[0](*args, **kwargs)

    return call


class _DynamoStandIn:
    """``torch._dynamo`` as the modules of :func:`stand_ins` use it while they run: its decorators, kept until dynamo
    is loaded; any other name loads the real package and is its."""

    OptimizedModule = OptimizedModule
    disable = staticmethod(_disable_once_loaded)

    @staticmethod
    def allow_in_graph(fn):
        _ALLOWED_IN_GRAPH.append(fn)  # dynamo's own registry, filled once it is loaded (:func:`_mark_allowed`)
        return fn

    @staticmethod
    def assume_constant_result(fn):
        fn._dynamo_marked_constant = True  # all that dynamo's decorator does
        return fn

    def __getattr__(self, name: str):
        import torch

        if torch.__dict__.get("_dynamo") is self:
            del torch._dynamo
        return getattr(importlib.import_module(_DYNAMO), name)


_STAND_IN = _DynamoStandIn()
_FROM_IMPORTS = {_DYNAMO: _STAND_IN, f"{_DYNAMO}._trace_wrapped_higher_order_op": types.SimpleNamespace(
    TransformGetItemToIndex=TransformGetItemToIndex)}


def _mark_allowed(dynamo: types.ModuleType) -> None:
    while _ALLOWED_IN_GRAPH:
        dynamo.allow_in_graph(_ALLOWED_IN_GRAPH.pop(0))


@contextlib.contextmanager
def _own_from_imports(module: types.ModuleType, serve: Callable[[str, tuple[str, ...]], Any]):
    """While ``module`` runs, its own ``from source import names`` get ``serve(source, names)`` where that is not
    None (``source`` absolute); every other import is the ordinary one."""
    real_import = builtins.__import__

    def imports(name, globals=None, locals=None, fromlist=(), level=0):
        globals = globals or {}
        if fromlist and globals.get("__name__") == module.__name__:
            source = importlib.util.resolve_name("." * level + name, globals.get("__package__")) if level else name
            served = serve(source, tuple(fromlist))
            if served is not None:
                return served
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = imports
    try:
        yield
    finally:
        builtins.__import__ = real_import


def _dynamo_names(source: str, names: tuple[str, ...]) -> Any:
    served = _FROM_IMPORTS.get(source) if _loaded_dynamo() is None else None
    return served if served is not None and all(n in dir(served) for n in names) else None


@contextlib.contextmanager
def _without_dynamo(module: types.ModuleType):
    """While ``module`` runs and dynamo is not loaded: ``torch._dynamo`` is :data:`_STAND_IN`, whose ``disable`` and
    ``allow_in_graph`` ``torch.compiler``'s are too, and the module's own ``from`` imports of the names
    :data:`_FROM_IMPORTS` serves get the stand-ins; every other import is the ordinary one."""
    if _loaded_dynamo() is not None:
        yield
        return
    import torch
    import torch.compiler

    compiler = torch.compiler
    real_disable, real_allow = compiler.disable, compiler.allow_in_graph
    outer = torch.__dict__.get("_dynamo")
    torch._dynamo = _STAND_IN
    compiler.disable, compiler.allow_in_graph = _STAND_IN.disable, _STAND_IN.allow_in_graph
    try:
        with _own_from_imports(module, _dynamo_names):
            yield
    finally:
        compiler.disable, compiler.allow_in_graph = real_disable, real_allow
        if torch.__dict__.get("_dynamo") is _STAND_IN and outer is not _STAND_IN:  # not inside another such module
            del torch._dynamo


class _Later(type):
    """The type of a name that stands for ``source.name`` until it is used: calling it, or asking it for an
    attribute, imports ``source`` and forwards to the real object; ``isinstance`` and ``issubclass`` answer False
    while ``source`` is not loaded (nothing can be an instance of a class not yet defined) and the real answer after."""

    def __new__(mcls, name, bases, namespace, **kwargs):
        if not any(isinstance(base, _Later) for base in bases):
            return super().__new__(mcls, name, bases, namespace, **kwargs)
        # a class body subclassing a stand-in: made on the real base, as the ordinary import would have
        bases = tuple(base.real() if isinstance(base, _Later) else base for base in bases)
        meta, _, kwargs = types.prepare_class(name, bases, kwargs)
        return meta(name, bases, namespace, **kwargs)

    def real(cls):
        return getattr(importlib.import_module(cls._source), cls._name)

    def __call__(cls, *args, **kwargs):
        return cls.real()(*args, **kwargs)

    def __getattr__(cls, attr: str):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return getattr(cls.real(), attr)

    def __instancecheck__(cls, obj) -> bool:
        return cls._source in sys.modules and isinstance(obj, cls.real())

    def __subclasscheck__(cls, sub) -> bool:
        return cls._source in sys.modules and issubclass(sub, cls.real())


def _later(source: str, name: str) -> _Later:
    return _Later(name, (), {"_source": source, "_name": name, "__module__": source,
                             "__doc__": f"Stands for {source}.{name} until used (tta.utils.lazy_imports)."})


def _served_to(module: str, importers) -> list[str]:
    """The importers of :func:`served_later` that ``module`` is, or is a module of."""
    return [name for name in importers if module == name or module.startswith(f"{name}.")]


def served_later() -> dict[str, dict[str, tuple[str, ...]]]:
    """Importer (a module, or a package for all its modules) -> {source module: the names its ``from source import
    ...`` gets as :class:`_Later`}:
    imports that load a large package for code paths a retrieval run never takes (transformers' tensor-parallel
    loading and detection losses, torchmetrics' plots, Lightning's FLOP counts in model summaries). None of these
    modules subclasses a served name."""
    return {
        "transformers": {
            "torch.distributed.tensor": ("DTensor", "Partial", "Replicate", "Shard", "distribute_tensor"),
            "torch.distributed.tensor._utils": ("compute_local_shape_and_global_offset",),
            "torch.distributed.tensor.placement_types": ("Shard", "_StridedShard"),
            "torch.distributed._composable.fsdp": ("fully_shard",),
            "torch.distributed.fsdp": ("CPUOffloadPolicy", "MixedPrecisionPolicy"),
            "torch.distributed.checkpoint.hf_storage": ("HuggingFaceStorageReader", "HuggingFaceStorageWriter"),
            "scipy.optimize": ("linear_sum_assignment",),
            "torch.nn.attention.flex_attention": ("BlockMask", "create_block_mask"),
            # these make torch's tensor-parallel styles, or load flex attention's, as they import
            "transformers.distributed.tensor_parallel": (
                "apply_tensor_parallelism", "gather_state_dict_for_save", "get_kv_heads_per_rank", "verify_tp_plan"),
            "transformers.distributed.expert_parallel": ("apply_expert_parallelism",),
            "transformers.integrations.flex_attention": ("flex_attention_forward", "make_flex_block_causal_mask")},
        **{importer: {"torchmetrics.utilities.plot": ("_AX_TYPE", "_PLOT_OUT_TYPE", "plot_single_or_multi_val")}
           for importer in ("torchmetrics.metric", "torchmetrics.collections")},
        "lightning.pytorch.utilities.model_summary.model_summary": {
            "torch.utils.flop_counter": ("FlopCounterMode",)},  # it imports triton's JIT
    }


def _serving_later(module: types.ModuleType) -> contextlib.AbstractContextManager:
    """While ``module`` runs, its ``from source import names`` of :func:`served_later` get :class:`_Later` stand-ins
    where ``source`` is not loaded yet and every name is one served; every other import is the ordinary one."""
    served = served_later()
    table: dict[str, set[str]] = {}
    for importer in _served_to(module.__name__, served):
        for source, names in served[importer].items():
            table.setdefault(source, set()).update(names)

    def later(source: str, names: tuple[str, ...]) -> Any:
        if source in sys.modules or not names or not set(names) <= table.get(source, set()):
            return None
        return types.SimpleNamespace(**{n: _later(source, n) for n in names})

    return _own_from_imports(module, later)


def patches() -> dict[str, Callable[[types.ModuleType], None]]:
    """The modules patched right after they run (the module docstring)."""
    return {"transformers.utils.import_utils": _cache_import_structure, _DYNAMO: _mark_allowed}


def stand_ins() -> dict[str, Callable[[types.ModuleType], contextlib.AbstractContextManager]]:
    """The modules that run with :func:`_without_dynamo` (the module docstring)."""
    return {name: _without_dynamo for name in (
        "lightning.fabric.wrappers", "lightning.pytorch.utilities.compile",
        "lightning.pytorch.trainer.connectors.logger_connector.result", "transformers.masking_utils",
        "transformers.integrations.deepgemm", "transformers.integrations.finegrained_fp8",
        "transformers.integrations.sonicmoe", "transformers.integrations.flex_attention", "transformers.modeling_utils")}


def _inside(*contexts: Callable[[types.ModuleType], contextlib.AbstractContextManager]):
    """One window made of ``contexts``, entered in their order (a module with a stand-in and served names)."""

    @contextlib.contextmanager
    def around(module: types.ModuleType):
        with contextlib.ExitStack() as stack:
            for context in contexts:
                stack.enter_context(context(module))
            yield
    return around


def defer_imports() -> None:
    """Defer the packages of :func:`deferrals`, patch the modules of :func:`patches`, run those of :func:`stand_ins`
    with their stand-ins, where not imported yet, and serve the names of :func:`served_later` (once per process)."""
    if any(isinstance(f, _Deferrer) for f in sys.meta_path):
        return
    pending = {name: d for name, d in deferrals().items() if name not in sys.modules}
    patching = {name: p for name, p in patches().items() if name not in sys.modules}
    around = {name: a for name, a in stand_ins().items() if name not in sys.modules}
    sys.meta_path.insert(0, _Deferrer(pending, patching, around, frozenset(served_later())))
