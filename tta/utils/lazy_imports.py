"""Import-time work the run does not need, deferred: Lightning imports all of torchmetrics to read its version.

``lightning`` checks ``torchmetrics.__version__`` and takes ``Metric`` / ``MetricCollection`` from it; torchmetrics'
``__init__`` meanwhile imports every metric family, which pulls in torchvision (and through it torch._dynamo),
transformers and scipy.signal: most of ``import lightning``'s seconds (benchmarks/startup.py). :func:`defer_torchmetrics`
puts a package object in its place that has the version and the two classes (their own small modules) and runs
the real ``__init__`` in place the first time anything else is asked of it, so nothing changes for code that uses
more of torchmetrics. Any surprise (an unexpected layout) leaves the ordinary import alone.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import sys
import types

_LIGHT = {"Metric": "torchmetrics.metric", "MetricCollection": "torchmetrics.collections"}


def defer_torchmetrics() -> bool:
    """Install the deferred torchmetrics package unless torchmetrics is imported already; True when installed."""
    if "torchmetrics" in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec("torchmetrics")
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.submodule_search_locations or not spec.origin:
        return False
    module = types.ModuleType("torchmetrics")
    module.__spec__, module.__file__, module.__path__ = spec, spec.origin, list(spec.submodule_search_locations)
    module.__package__ = "torchmetrics"
    # what the real __init__ defines before its imports, and its submodules read back (torchmetrics.utilities.prints)
    logger = logging.getLogger("torchmetrics")
    handler = logging.StreamHandler()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    module._logger, module._PACKAGE_ROOT = logger, os.path.dirname(spec.origin)
    module._PROJECT_ROOT = os.path.dirname(module._PACKAGE_ROOT)

    def load_all() -> None:
        del module.__getattr__
        logger.removeHandler(handler)  # the real __init__ adds its own
        with open(spec.origin, encoding="utf-8") as f:
            code = compile(f.read(), spec.origin, "exec")
        exec(code, module.__dict__)  # the real __init__, in this same module object

    def __getattr__(name: str):
        if name in _LIGHT:
            importlib.import_module("torchmetrics.utilities")  # first, as the real __init__ does (circular imports)
            value = getattr(importlib.import_module(_LIGHT[name]), name)
            setattr(module, name, value)
            return value
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        load_all()
        return getattr(module, name)

    module.__getattr__ = __getattr__
    sys.modules["torchmetrics"] = module
    try:
        about = importlib.import_module("torchmetrics.__about__")
        module.__version__ = about.__version__
    except Exception:  # noqa: BLE001 - any surprise: back to the ordinary import
        for name in [m for m in sys.modules if m == "torchmetrics" or m.startswith("torchmetrics.")]:
            del sys.modules[name]
        return False
    return True
