"""A node's heartbeat keeps beating while its facts are slow to find: a host busy
pulling an image answers ``podman version`` late, and a late beat makes the node
NotReady, which fails every gang on it."""

from __future__ import annotations

import json
import os
import selectors
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from ringleader.cluster import probe


def _fake_podman(bin_dir: Path, body: str) -> None:
    path = bin_dir / "podman"
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def _lines(proc: subprocess.Popen[str], count: int, limit_s: float = 60) -> list[str]:
    """The next ``count`` lines the heartbeat prints (fails if it falls silent)."""
    assert proc.stdout is not None
    out = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while len(out) < count:
            assert sel.select(limit_s), f"the heartbeat fell silent after {out}"
            line = proc.stdout.readline()
            assert line, f"the heartbeat ended after {out}"
            out.append(line.strip())
    return out


def test_beats_go_on_while_a_reprobe_waits_for_a_busy_runtime(tmp_path: Path) -> None:
    bin_dir, gate, calls = tmp_path / "bin", tmp_path / "gate", tmp_path / "calls"
    bin_dir.mkdir()
    # The first ask answers; every later one waits for the test's gate (a busy store).
    _fake_podman(bin_dir, f"echo x >> {calls}\n"
                          f'if [ "$(/usr/bin/wc -l < {calls})" -ge 2 ]; then\n'
                          f"  while [ ! -e {gate} ]; do /bin/sleep 0.05; done\nfi\n"
                          "echo 4.3.1")  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    code = "import sys; from ringleader.cluster import probe; probe.heartbeat(0.05, 3)"
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True,
                            env=env)  # fmt: skip
    try:
        first = json.loads(_lines(proc, 1)[0])
        assert first["containerRuntime"] == "podman 4.3.1"
        # The reprobe (third beat) is stuck in podman: beats still come, ten of them.
        blocked = _lines(proc, 12)
        assert calls.read_text().count("x") == 2  # the reprobe asked and waits
        assert blocked.count("beat") >= 11 and not any(b.startswith("{") for b in blocked)
        gate.touch()
        later = _lines(proc, 40)
        facts = [json.loads(line) for line in later if line.startswith("{")]
        assert facts and facts[0]["containerRuntime"] == "podman 4.3.1", later
    finally:
        proc.kill()
        proc.wait()


def test_a_runtime_too_busy_to_answer_keeps_its_last_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    _fake_podman(bin_dir, "exec /bin/sleep 30")
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(probe, "RUNTIME_TIMEOUT_S", 0.3)
    assert probe.container_runtime() == ("", f"podman version: {probe.RUNTIME_BUSY}")
    kept = probe.node(("podman 4.3.1", ""))
    assert (kept["containerRuntime"], kept["containerRuntimeError"]) == ("podman 4.3.1", "")
    # A broken runtime (it answers, with an error) is news, not kept over.
    _fake_podman(bin_dir, "echo 'cannot open the store' >&2; exit 125")
    broken = probe.node(("podman 4.3.1", ""))
    assert broken["containerRuntime"] == ""
    assert broken["containerRuntimeError"] == "podman version: cannot open the store"
