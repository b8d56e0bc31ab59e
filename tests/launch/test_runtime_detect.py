"""Which container runtime a host has: asked again when it is slow or busy, so one bad
moment at a server's start does not leave it refusing every image."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ringleader.launch import container_runtime as containers


def _fake(bin_dir: Path, name: str, body: str) -> None:
    path = bin_dir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))  # only the fakes: not this host's own
    monkeypatch.setattr(containers, "DETECT_PAUSE_S", 0.0)
    return folder


def test_a_runtime_that_fails_once_is_asked_again(bin_dir: Path, tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    # Busy the first time (as with a store locked by a build), well the second.
    _fake(bin_dir, "podman", f'echo x >> {calls}; [ "$(/usr/bin/wc -l < {calls})" -ge 2 ] || exit 125; '
                             "echo 4.3.1")  # fmt: skip
    found = containers.detect()
    assert found == {"name": "podman", "path": str(bin_dir / "podman"), "version": "4.3.1"}
    assert calls.read_text().count("x") == 2


def test_a_runtime_that_hangs_is_asked_again_then_the_next_is_tried(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(containers, "DETECT_TIMEOUT_S", 0.5)
    calls = tmp_path / "calls"
    _fake(bin_dir, "podman", f"echo x >> {calls}; exec /bin/sleep 30")
    _fake(bin_dir, "docker", "echo 28.2.2")
    found = containers.detect(tries=2)
    assert found is not None and found["name"] == "docker" and found["version"] == "28.2.2"
    assert calls.read_text().count("x") == 2  # each timed-out ask was ended, then asked again


def test_no_runtime_that_answers_is_none(bin_dir: Path) -> None:
    _fake(bin_dir, "podman", "echo broken >&2; exit 125")
    assert containers.detect() is None


def test_a_host_with_both_runs_the_one_its_setting_names(
    bin_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _fake(bin_dir, "podman", "echo 4.3.1")
    _fake(bin_dir, "docker", "echo 28.2.2")
    assert containers.detect() == {"name": "podman", "path": str(bin_dir / "podman"),
                                   "version": "4.3.1"}  # fmt: skip
    monkeypatch.setenv(containers.RUNTIME_VAR, "docker")
    assert containers.detect() == {"name": "docker", "path": str(bin_dir / "docker"),
                                   "version": "28.2.2"}  # fmt: skip
    monkeypatch.setenv(containers.RUNTIME_VAR, "rkt")  # not one: the usual order
    assert containers.runtime_names() == ("podman", "docker")
