"""What ``sync`` copies and ``doctor`` fingerprints (``cluster/probe.files``): git's
tracked and unignored files in a checkout, a worktree (whose ``.git`` is a file) too."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from ringleader.cluster.probe import files


def _git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True, timeout=60)


def test_a_worktree_is_read_with_git_like_its_checkout(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "train.py").write_text("print(1)\n")
    (repo / ".gitignore").write_text("cache/\n")
    _git("init", "-q", str(repo))
    _git("-C", str(repo), "add", ".")
    _git("-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    tree = tmp_path / "tree"
    _git("-C", str(repo), "worktree", "add", "-q", str(tree))
    assert (tree / ".git").is_file()
    for where in (repo, tree):
        (where / "cache").mkdir()
        (where / "cache" / "blob.bin").write_bytes(b"0" * 10)  # ignored: never counted
        (where / "notes.txt").write_text("new\n")  # untracked, not ignored: copied
        assert files(str(where)) == [".gitignore", "notes.txt", "train.py"], where


def test_a_directory_past_the_bounds_is_not_fingerprinted_and_doctor_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """doctor run from /tmp or a home directory read every byte until its probe timed
    out ("a bug in ringleader"); past the bounds the code is not compared, and why."""
    from ringleader.cluster import doctor, probe

    for i in range(12):
        (tmp_path / f"f{i}.txt").write_text("x" * 100)
    monkeypatch.setattr(probe, "FINGERPRINT_MAX_FILES", 10)
    code, count = probe.fingerprint(str(tmp_path))
    assert code == probe.TOO_BIG and count > 10
    monkeypatch.setattr(probe, "FINGERPRINT_MAX_FILES", 100)
    monkeypatch.setattr(probe, "FINGERPRINT_MAX_BYTES", 1000)
    assert probe.fingerprint(str(tmp_path))[0] == probe.TOO_BIG  # 1,200 bytes
    monkeypatch.setattr(probe, "FINGERPRINT_MAX_BYTES", 10_000)
    code, count = probe.fingerprint(str(tmp_path))
    assert count == 12 and len(code) == 16

    facts = {"workdir": True, "code": probe.TOO_BIG, "files": 20_001}
    check = doctor.code_check("/tmp", "h1", facts, {"code": "abc", "files": 3})
    assert check.ok is None and "not compared" in check.detail and "/tmp" in check.detail
    same = doctor.code_check("/w", "h1", {"workdir": True, "code": code, "files": 12},
                             {"code": code, "files": 12})  # fmt: skip
    assert same.ok is True


def test_this_machines_home_inside_the_directory_is_never_code(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A home kept beside the code (its live database, logs and access key) made doctor's
    code check differ between two reads and sync copy the credentials to every host.
    Only this machine's home is left out, by doctor and sync alike: a project's own
    config/credentials.json is code like any file."""
    from ringleader.cluster import doctor, probe, sync
    from ringleader.launch.ssh import SSHOptions

    (tmp_path / "train.py").write_text("print(1)\n")
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "credentials.json").write_text("{}")  # the project's own
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    (home / "credentials.json").write_text("{}")
    (home / "ringleader.db-wal").write_bytes(b"changes at every write")
    os.mkfifo(tmp_path / "a.fifo")  # read, it would hang the probe
    monkeypatch.setenv("RINGLEADER_HOME", str(home))
    plan = doctor.Plan(hosts=[], workdir=str(tmp_path), python="python")
    assert doctor._skips(plan) == ["--skip=home"]
    code = ["config/credentials.json", "train.py"]
    assert probe.files(str(tmp_path), skip=("home",)) == code
    before = probe.fingerprint(str(tmp_path), ("home",))
    (home / "ringleader.db-wal").write_bytes(b"another write")
    assert probe.fingerprint(str(tmp_path), ("home",)) == before
    (tmp_path / "config" / "credentials.json").write_text('{"changed": 1}')
    assert probe.fingerprint(str(tmp_path), ("home",)) != before
    _git("init", "-q", str(tmp_path))  # in a git checkout too (an untracked, unignored home)
    assert probe.files(str(tmp_path), skip=("home",)) == code
    assert "--exclude=/home/" in sync.rsync_argv(tmp_path, "h1", SSHOptions())
    monkeypatch.setenv("RINGLEADER_HOME", str(tmp_path.parent / "elsewhere"))
    assert doctor._skips(plan) == []
    assert not [a for a in sync.rsync_argv(tmp_path, "h1", SSHOptions()) if "--exclude=/h" in a]
