"""A non-editable install works away from the repository: the wheel holds every data file of the package (configs,
word tables) and ``python -m tta.run`` from another directory gives the same results as the repository's code."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.conftest import tiny_overrides
from tta.media.video import video_decoder
from tta.run import run
from tta.utils.config import CONF_DIR, compose

REPO = Path(__file__).resolve().parents[1]
CONF = REPO / "conf"  # the configs' one place in the repository; the wheel ships them as tta/conf


def _can_build_wheels() -> bool:
    """setuptools builds wheels itself from 70.1 on; older ones need the ``wheel`` package."""
    if importlib.util.find_spec("setuptools") is None:
        return False
    import setuptools

    major, minor = (int(p) for p in setuptools.__version__.split(".")[:2])
    return (major, minor) >= (70, 1) or importlib.util.find_spec("wheel") is not None


def _data_files() -> set[str]:
    """Every non-Python file of the package source and every config of the top-level conf/, as a path inside the
    wheel (the configs under tta/conf)."""
    package = {p.relative_to(REPO).as_posix() for p in (REPO / "tta").rglob("*")
               if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts}
    return package | {f"tta/conf/{p.relative_to(CONF).as_posix()}" for p in CONF.rglob("*") if p.is_file()}


def test_a_checkout_reads_its_top_level_conf():
    """In the repository (and an editable install of it) the configs are read where users browse them, and only
    there: the wheel's tta/conf is made from conf/ at build time."""
    assert CONF_DIR == CONF and (CONF / "run.yaml").is_file()
    assert not list((REPO / "tta").rglob("*.yaml")), "configs belong in the top-level conf/"


@pytest.fixture(scope="module")
def installed_venv(tmp_path_factory) -> Path:
    """A fresh venv holding a wheel of this repository; the running interpreter's packages (torch, ...) are seen
    through ``--system-site-packages`` and, when this interpreter runs in a venv itself, a .pth file."""
    if not _can_build_wheels():
        pytest.skip('building a wheel needs setuptools>=70.1 (or the wheel package): pip install "setuptools>=70.1"')
    tmp = tmp_path_factory.mktemp("install")
    src = tmp / "src"  # a copy, so a stale build/ of the checkout cannot leak files into the wheel
    for name in ("tta", "conf"):
        shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy2(REPO / name, src / name)
    wheels = tmp / "wheels"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(wheels), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = wheels.glob("tta-*.whl")
    missing = _data_files() - set(zipfile.ZipFile(wheel).namelist())
    assert not missing, f"package data missing from the wheel (setup.py, pyproject.toml package-data): {missing}"

    env_dir = tmp / "venv"
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=os.name != "nt").create(env_dir)
    python = env_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True, env=_clean_env()).stdout.strip()
    if sys.prefix != sys.base_prefix:  # a plain path line: the parent's own .pth files (its editable tta) stay off
        Path(purelib, "parent-site.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    install = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--no-index", "--ignore-installed",
                              "-q", str(wheel)], capture_output=True, text=True, timeout=300, env=_clean_env())
    assert install.returncode == 0, install.stderr[-3000:]
    return python


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}
    env["OMP_NUM_THREADS"] = "1"
    return env


@pytest.mark.parametrize("platform,machine,has_decord", [("linux", "x86_64", True), ("win32", "AMD64", True),
                                                         ("linux", "aarch64", False), ("darwin", "arm64", False),
                                                         ("darwin", "x86_64", False)])
def test_decord_is_required_only_where_it_has_wheels(platform, machine, has_decord):
    """decord 0.6 has wheels for x86-64 Linux and Windows (macOS only up to Python 3.8) and no sdist; PyAV always."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+
    from packaging.requirements import Requirement

    deps = [Requirement(d) for d in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"]]
    env = {"sys_platform": platform, "platform_machine": machine, "python_version": "3.11"}
    wanted = {r.name for r in deps if r.marker is None or r.marker.evaluate(env)}
    assert ("decord" in wanted) == has_decord and "av" in wanted


def test_installed_wheel_runs_outside_the_repository(installed_venv, tiny_cache, tmp_path):
    away = tmp_path / "elsewhere"
    away.mkdir()
    assert REPO not in away.resolve().parents
    where = subprocess.run([str(installed_venv), "-c", "import tta; from tta.utils.config import CONF_DIR; "
                            "print(tta.__file__); print(CONF_DIR)"], cwd=away,
                           capture_output=True, text=True, timeout=120, env=_clean_env())
    assert where.returncode == 0, where.stderr[-3000:]
    imported, configs = (Path(line).resolve() for line in where.stdout.split())
    assert installed_venv.parent.parent.resolve() in imported.parents, imported
    assert REPO.resolve() not in imported.parents, imported
    assert configs == imported.parent / "conf", configs  # the wheel's copy, not the checkout's conf/

    overrides = tiny_overrides(tiny_cache)
    cli = subprocess.run([str(installed_venv), "-m", "tta.run", *overrides, f"hydra.run.dir={away / 'run'}"],
                         cwd=away, capture_output=True, text=True, timeout=600, env=_clean_env())
    assert cli.returncode == 0, cli.stderr[-3000:]
    assert (cli.stdout + cli.stderr).count(f"video decoder: {video_decoder()}") == 1  # logged once per run
    script = installed_venv.parent / ("tta-run.exe" if os.name == "nt" else "tta-run")  # the console script
    typo = subprocess.run([str(script), "adapter=hatvrt"], cwd=away, capture_output=True, text=True, timeout=120,
                          env=_clean_env())
    assert typo.returncode == 2, typo.stderr[-3000:]
    assert typo.stderr.startswith("error: In 'run': Could not find 'adapter/hatvrt'; did you mean adapter=hatvtr? "
                                "the options in 'adapter'")
    installed = json.loads((away / "run" / "results.json").read_text())
    in_repo = run(compose("run", overrides), tmp_path / "repo")
    assert installed["retrieval"]["R@1"] == in_repo["retrieval"]["R@1"]
    assert installed["retrieval"] == in_repo["retrieval"]
    assert installed["provenance"]["decoder"] == in_repo["provenance"]["decoder"]
    assert installed["provenance"]["decoder"].split()[0] in ("decord", "pyav")
