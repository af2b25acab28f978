"""Lightning's import of torchmetrics is deferred: a run's imports skip the metric families (torchvision, ...)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CHECK = """
import sys
import tta.run, lightning, torchmetrics
from tta.metrics.streaming import StreamScores
light = "torchvision" not in sys.modules and "torchmetrics.functional" not in sys.modules
assert torchmetrics.__version__ and torchmetrics.Metric.__name__ == "Metric"
full = hasattr(torchmetrics, "MeanSquaredError")  # anything else loads the real package in place
print(light, full, "torchmetrics.functional" in sys.modules)
"""


@pytest.mark.heavy  # a fresh interpreter importing torch and Lightning: seconds
def test_lightning_imports_without_the_metric_families():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "True", "True"]



TORCHVISION = """
import sys, torch
import tta.run, open_clip
print("torchvision.datasets" not in sys.modules, "torchvision.models.resnet" not in sys.modules)
import torchvision
version = torchvision.__version__  # served without loading the package
print("torchvision.datasets" not in sys.modules)
boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]])
print(torchvision.ops.nms(boxes, torch.tensor([0.9, 0.8]), 0.5).tolist() == [0],  # the C extension's operator
      torchvision.models.resnet18().fc.out_features == 1000, torchvision.datasets.FakeData(size=1)[0] is not None,
      version == torchvision.version.__version__)
"""


@pytest.mark.heavy  # a fresh interpreter importing torch and open_clip: seconds
def test_open_clip_imports_without_torchvisions_datasets_and_models():
    """open_clip's imports leave torchvision's dataset and model definitions unloaded; asking for them (or anything
    else of the package) loads them in place, and the package's C operators work."""
    out = subprocess.run([sys.executable, "-c", TORCHVISION], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True"] * 7


STRUCTURE = """
import hashlib, sys
import tta, transformers, transformers.models
maps = [(sorted(m._modules), sorted(m._class_to_module.items())) for m in (transformers, transformers.models)]
print(hashlib.sha1(repr(maps).encode()).hexdigest())
"""


@pytest.mark.heavy  # fresh interpreters importing transformers: seconds
def test_transformers_import_structure_from_the_cache_is_the_one_its_scan_builds(tmp_path):
    """transformers' map of its names is the same built by its own scan (eager imports), by a first import that
    writes the cache, by a second that reads it (without writing it again), and where no cache can be written."""
    import os

    def digest(**env) -> str:
        return subprocess.run([sys.executable, "-c", STRUCTURE], env={**os.environ, "TTA_CACHE": str(tmp_path), **env},
                              capture_output=True, text=True, check=True).stdout.strip()

    own = digest(TTA_EAGER_IMPORTS="1")
    assert not (tmp_path / "imports").exists()
    written = digest()
    files = {f: f.stat().st_mtime_ns for f in (tmp_path / "imports").glob("transformers-*.json")}
    assert own == written == digest() and len(files) == 2
    assert {f: f.stat().st_mtime_ns for f in files} == files
    assert digest(TTA_CACHE="/proc/no-cache-can-be-made-here") == own  # an unwritable cache: the scan, as usual


def test_an_editable_install_has_no_identity_to_cache_under():
    from tta.utils.lazy_imports import _installed_identity

    assert _installed_identity("no-such-distribution") is None
    identity = _installed_identity("transformers")
    assert identity is None or identity.startswith("transformers ")



DYNAMO = """
import sys, torch
import tta.run, lightning.pytorch, open_clip
from transformers.integrations import finegrained_fp8
from lightning.fabric.wrappers import _unwrap_compiled
from lightning.pytorch.utilities.compile import from_compiled
from lightning.pytorch.trainer.connectors.logger_connector.result import _ResultCollection
from transformers.masking_utils import TransformGetItemToIndex
from tta.models.retrieval import RetrievalModel, TowerConfig
RetrievalModel(TowerConfig(), weights_follow=True)  # the embedded towers, BERT's modelling code included
out = ["torch._dynamo" not in sys.modules]
plain = torch.nn.Linear(2, 2)
out.append(_unwrap_compiled(plain)[0] is plain)  # nothing can be compiled yet
compiled = torch.compile(plain, backend="eager")  # loads dynamo
out += ["torch._dynamo" in sys.modules, _unwrap_compiled(compiled)[0] is plain]
module = lightning.pytorch.LightningModule()
out.append(from_compiled(torch.compile(module, backend="eager")) is module)
from torch._dynamo import trace_rules
out.append(id(finegrained_fp8._load_finegrained_fp8_kernel) in trace_rules._allowed_callable_ids)
with TransformGetItemToIndex() as mode:
    out.append(type(mode).__module__)
results = _ResultCollection(training=True)

def step(x):  # Lightning's logging is kept out of compiled graphs: one break around it
    results.log("training_step", "loss", x.sum(), batch_size=1)
    return x * 2

out.append(torch._dynamo.explain(step)(torch.ones(2)).graph_break_count)
print(*out)
"""


@pytest.mark.heavy  # fresh interpreters importing torch, Lightning, open_clip and transformers: seconds
def test_torch_compiler_loads_only_when_used_and_then_works_as_with_ordinary_imports():
    """Lightning's and transformers' import-time uses of dynamo (a stand-in ``OptimizedModule``, decorators kept
    until dynamo loads) leave it unloaded through a run's imports and model build; once something compiles, compiled
    modules are recognised, marked functions are allowed in graphs and Lightning's logging stays out of them, exactly
    as with the ordinary imports."""
    def run(**env) -> list[str]:
        import os

        return subprocess.run([sys.executable, "-c", DYNAMO], env={**os.environ, **env}, capture_output=True,
                              text=True, check=True).stdout.split()

    compiled_as_usual = ["True"] * 5 + ["torch._dynamo._trace_wrapped_higher_order_op", "1"]
    assert run() == ["True", *compiled_as_usual]
    assert run(TTA_EAGER_IMPORTS="1") == ["False", *compiled_as_usual]


def test_names_served_later_load_their_source_on_first_use(tmp_path, monkeypatch):
    """A package's ``from source import names`` gets stand-ins while ``source`` is unloaded: calling one or asking it
    for an attribute loads ``source`` and forwards; ``isinstance`` is False until then and real after; a class body
    subclassing one gets the real base; an import naming anything not served, or made at run time, is ordinary."""
    from tta.utils import lazy_imports

    (tmp_path / "lazyheavy.py").write_text(
        "class Thing:\n    kind = 'real'\n\ndef helper(x):\n    return x + 1\n\nOTHER = 5\n")
    (tmp_path / "lazyuser").mkdir()
    (tmp_path / "lazyuser" / "__init__.py").write_text("")
    (tmp_path / "lazyuser" / "light.py").write_text(
        "from lazyheavy import Thing, helper\n\ndef at_run_time():\n    from lazyheavy import Thing\n    return Thing\n")
    (tmp_path / "lazyuser" / "mixed.py").write_text("from lazyheavy import Thing, OTHER\n")
    (tmp_path / "lazyuser" / "sub.py").write_text("from lazyheavy import Thing\n\nclass Sub(Thing):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(lazy_imports, "served_later", lambda: {"lazyuser": {"lazyheavy": ("Thing", "helper")}})
    finder = lazy_imports._Deferrer({}, {}, {}, frozenset({"lazyuser"}))
    monkeypatch.setattr(sys, "meta_path", [finder, *sys.meta_path])
    for name in ("lazyheavy", "lazyuser", "lazyuser.light", "lazyuser.mixed", "lazyuser.sub"):
        monkeypatch.delitem(sys.modules, name, raising=False)

    import lazyuser.light as light

    assert "lazyheavy" not in sys.modules and not isinstance(object(), light.Thing)
    assert light.helper(1) == 2 and "lazyheavy" in sys.modules  # the first call loads the source
    import lazyheavy

    assert isinstance(lazyheavy.Thing(), light.Thing) and issubclass(lazyheavy.Thing, light.Thing)
    assert light.Thing.kind == "real" and type(light.Thing()) is lazyheavy.Thing
    assert light.at_run_time() is lazyheavy.Thing  # a function's import at run time: the ordinary one
    monkeypatch.delitem(sys.modules, "lazyheavy")
    import lazyuser.mixed as mixed  # OTHER is not served: the whole statement imports as usual

    assert mixed.Thing is sys.modules["lazyheavy"].Thing
    monkeypatch.delitem(sys.modules, "lazyheavy")
    import lazyuser.sub as sub

    assert sub.Sub.__mro__[1] is sys.modules["lazyheavy"].Thing and sub.Sub().kind == "real"


SERVED = """
import sys
import numpy as np, torch
import tta.run, lightning.pytorch, open_clip
from tta.models.retrieval import RetrievalModel, TowerConfig
RetrievalModel(TowerConfig(), weights_follow=True)  # the embedded towers, BERT's modelling code included
heavy = ("torch.distributed.tensor", "scipy.optimize", "matplotlib", "torch.nn.attention.flex_attention", "ftfy.fixes",
         "triton", "torch.utils.flop_counter")
out = [all(name not in sys.modules for name in heavy)]
from transformers.loss import loss_for_object_detection as detection
from transformers.distributed import sharding_utils, utils as dist_utils
out.append(detection.linear_sum_assignment(np.array([[4.0, 1.0], [2.0, 8.0]]))[1].tolist() == [1, 0])
out.append(dist_utils.is_dtensor(torch.zeros(1)))
from torch.distributed.tensor import DTensor
from transformers.masking_utils import BlockMask
from torch.nn.attention.flex_attention import BlockMask as RealBlockMask
out += [sharding_utils.DTensor.from_local == DTensor.from_local, issubclass(RealBlockMask, BlockMask)]
import torchmetrics
fig, ax = torchmetrics.MeanMetric().plot(torch.tensor(1.0))
import open_clip.tokenizer
out += [type(fig).__name__, open_clip.tokenizer.basic_clean("caf\u00c3\u00a9 &amp; tea")]


class Tiny(lightning.pytorch.LightningModule):
    def __init__(self):
        super().__init__()
        self.layer, self.example_input_array = torch.nn.Linear(4, 2), torch.zeros(1, 4)

    def forward(self, x):
        return self.layer(x)


from lightning.pytorch.utilities.model_summary import ModelSummary
out.append(ModelSummary(Tiny()).total_flops)
print(*out, sep="|")
"""


@pytest.mark.heavy  # fresh interpreters importing torch, Lightning, open_clip and transformers: seconds
def test_a_runs_imports_leave_distributed_tensors_detection_losses_and_plots_unloaded_yet_usable():
    """Building the embedded model imports none of torch's distributed tensors, scipy.optimize, matplotlib, flex
    attention, triton or ftfy; each of the names served in their place works as the real one when used (an
    assignment, a distributed-tensor check and method, a metric's plot, text repair, a model summary's FLOPs)."""
    import os

    def run(**env) -> list[str]:
        return subprocess.run([sys.executable, "-c", SERVED], env={**os.environ, **env}, capture_output=True,
                              text=True, check=True).stdout.strip().split("|")

    used_as_usual = ["True", "False", "True", "True", "Figure", "café & tea", "16"]
    assert run() == ["True", *used_as_usual]
    assert run(TTA_EAGER_IMPORTS="1") == ["False", *used_as_usual]
