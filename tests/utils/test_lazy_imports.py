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
