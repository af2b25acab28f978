"""The code base passes the project's ruff configuration (``[tool.ruff]`` in pyproject.toml)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_ruff_check_is_clean():
    if importlib.util.find_spec("ruff") is None:
        pytest.skip("ruff is not installed (pip install -e '.[dev]')")
    proc = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "--no-cache", "."], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"ruff check found problems:\n{proc.stdout}{proc.stderr}"
