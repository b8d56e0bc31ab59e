"""What ``sync`` copies and ``doctor`` fingerprints (``cluster/probe.files``): git's
tracked and unignored files in a checkout, a worktree (whose ``.git`` is a file) too."""

from __future__ import annotations

import subprocess
from pathlib import Path

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
