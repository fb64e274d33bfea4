"""The reconcile loop's lock (automation/reconcile.py): never through a symlink, stack names as
Pulumi validates them (no path out of the project), and a missing --cwd is not created."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from automation.reconcile import LOCK_DIR, ReconcileError, check_stack_name, exclusive, lock_path
from modelplane.commands import reconcile as command


def test_19_12_the_lock_never_follows_a_symlink(tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    lock = lock_path(tmp_path, "dev")
    lock.parent.mkdir(parents=True)
    lock.symlink_to(victim)
    with pytest.raises(ReconcileError, match="it is a symlink"), exclusive(lock, "dev", root=tmp_path):
        pass
    assert victim.read_text() == "precious\n"


def test_19_12_a_symlinked_lock_directory_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    project = tmp_path / "project"
    (project / ".modelplane").mkdir(parents=True)
    (project / LOCK_DIR).symlink_to(elsewhere)
    with pytest.raises(ReconcileError, match="is a symlink or not a directory"), \
            exclusive(lock_path(project, "dev"), "dev", root=project):
        pass
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("name", ["../../../outside", "..", "a/../b", "x y", "a/b/c/d", "", "é", "a" * 101, "./."])
def test_19_12_stack_names_are_validated_as_pulumi_validates_them(tmp_path: Path, name: str) -> None:
    with pytest.raises(ReconcileError, match="a stack name may only contain"):
        lock_path(tmp_path, name)


@pytest.mark.parametrize("name", ["dev", "my-org/modelplane/prod.eu_1", "proj/stack", "a.b"])
def test_pulumi_stack_names_stay_in_the_lock_directory(tmp_path: Path, name: str) -> None:
    assert check_stack_name(name) == name
    assert lock_path(tmp_path, name).parent == tmp_path / LOCK_DIR


def test_19_12_a_missing_cwd_is_not_created(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope"
    args = argparse.Namespace(stack="dev", interval="60s", cycles=1, cwd=str(missing))
    assert command.run(args) == 2
    assert not missing.exists()
    assert "it is not created" in capsys.readouterr().err
