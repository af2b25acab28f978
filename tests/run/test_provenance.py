"""results.json ``provenance`` (tta/results/environment.py): the git revision and dirty flag of a checkout, absent outside one."""

from __future__ import annotations

import shutil
import subprocess

import pytest

import tta.results.environment
from tta.results import code_revision, git_revision, provenance
from tta.utils.config import compose


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
def test_git_revision_of_a_clean_then_dirty_checkout_and_outside_one(tmp_path, monkeypatch):
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-C", str(repo), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], check=True)
    (repo / "a.py").write_text("x = 1\n")
    subprocess.run([*git, "add", "a.py"], check=True)
    subprocess.run([*git, "commit", "-qm", "one"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    (repo / "untracked.txt").write_text("not part of the code")
    assert git_revision(repo) == {"commit": head, "dirty": False}
    (repo / "a.py").write_text("x = 2\n")
    assert git_revision(repo) == {"commit": head, "dirty": True}
    outside = tmp_path / "plain"
    outside.mkdir()
    monkeypatch.delenv("TTA_COMMIT", raising=False)
    assert git_revision(outside) is None
    monkeypatch.setenv("TTA_COMMIT", "abc1234")  # a copy of the files alone, its commit named by whoever copied it
    assert git_revision(outside) == {"commit": "abc1234", "dirty": None}
    assert git_revision(repo)["commit"] == head  # a checkout's own history wins


@pytest.mark.heavy  # imports open_clip and lightning for their versions
def test_provenance_keys():
    prov = provenance(compose("run", ["trainer.precision=bf16-mixed"]), started=0.0)
    assert {"versions", "decoder", "device", "precision", "threads", "host", "command", "started", "finished"} <= set(prov)
    assert prov["decoder"].split()[0] in ("decord", "pyav")
    assert prov["precision"] == "bf16-mixed" and prov["started"] == "1970-01-01T00:00:00+00:00"
    assert {"torch", "lightning", "python"} <= set(prov["versions"]) and prov["device"]["name"]


def test_a_commit_made_during_a_run_does_not_become_its_revision(monkeypatch):
    revisions = iter([{"commit": "a" * 40, "dirty": False}, {"commit": "b" * 40, "dirty": False}])
    monkeypatch.setattr(tta.results.environment, "git_revision", lambda path=None: next(revisions))
    code_revision.cache_clear()
    try:
        assert code_revision()["commit"] == "a" * 40  # the run's start
        assert tta.results.environment.git_revision()["commit"] == "b" * 40  # someone commits meanwhile
        assert code_revision()["commit"] == "a" * 40
    finally:
        code_revision.cache_clear()
