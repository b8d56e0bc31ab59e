"""A host's image pull (``launch/image_pull.py``) as a waiting user reads it: each layer
as it starts, then how long it took; the registry's own words when it fails; a pull that
hangs is killed at its limit, leaving no process.  The runtime here is a script that
speaks as podman does when its output is not a terminal (the real one, with a real
registry, is in tests/server/test_registry.py)."""

from __future__ import annotations

import json
import os
import selectors
import stat
import subprocess
import sys
import threading
from pathlib import Path

from ringleader.launch import image_pull
from ringleader.server.backends.local.status import pull_progress, status_of
from tests.conftest import wait_until


def _runtime(tmp_path: Path, body: str, name: str = "podman") -> str:
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


PULL = """case "$1" in
pull) echo "Trying to pull reg:5000/i:1..." >&2
      echo "Copying blob sha256:52d32e69cb637a2a993a347e7bb93e43d682c543f8378beeb54588b5c9d65549" >&2
      echo "Copying blob sha256:6036fbc135ccf70f2a125d2ce8fc283cfa23c7d2af53f1604156ecc2f203bd47" >&2
      echo "Writing manifest to image destination" >&2 ;;
image) echo 310000000 ;;
esac
"""


def test_a_pull_tells_each_layer_then_the_time_and_size(tmp_path: Path) -> None:
    told: list[tuple[str, bool]] = []
    problem = image_pull.pull(
        _runtime(tmp_path, PULL), "reg:5000/i:1", [], 30, lambda t, d: told.append((t, d))
    )
    assert problem == ""
    texts = [t for t, _ in told]
    assert texts[0] == "pulling image reg:5000/i:1"
    assert texts[1].startswith("pulling image reg:5000/i:1: layer 1 (52d32e69cb63), ")
    assert texts[2].startswith("pulling image reg:5000/i:1: layer 2 (6036fbc135cc), ")
    assert texts[-1].startswith("pulled image reg:5000/i:1 in ") and texts[-1].endswith(
        " s (310 MB)"
    )
    assert [d for _, d in told] == [False] * (len(told) - 1) + [True]


DOCKER_PULL = """test "$1 $3 $4" = "--config pull --" || { echo "unknown flag: $*" >&2; exit 125; }
case "$3" in
pull) echo "bookworm: Pulling from ringleader-test/debian-python"
      echo "52d32e69cb63: Pulling fs layer"
      echo "6036fbc135cc: Pulling fs layer"
      echo "52d32e69cb63: Pull complete"
      echo "Status: Downloaded newer image for reg:5000/i:1" ;;
esac
case "$1" in image) echo 310000000 ;; esac
"""


def test_dockers_pull_takes_its_config_before_the_verb_and_tells_its_layers(
    tmp_path: Path,
) -> None:
    """docker's progress is on its stdout, each layer a ``D: Pulling fs layer``; the
    registry's password comes as its global ``--config DIR``."""
    told: list[str] = []
    docker = _runtime(tmp_path, DOCKER_PULL, "docker")
    problem = image_pull.pull(docker, "reg:5000/i:1", ["--config", str(tmp_path)], 30,
                              lambda t, _d: told.append(t))  # fmt: skip
    assert problem == ""
    assert told[1].startswith("pulling image reg:5000/i:1: layer 1 (52d32e69cb63), ")
    assert told[2].startswith("pulling image reg:5000/i:1: layer 2 (6036fbc135cc), ")
    assert told[-1].startswith("pulled image reg:5000/i:1 in "), told


def test_a_failed_pull_gives_the_registrys_last_words(tmp_path: Path) -> None:
    runtime = _runtime(
        tmp_path,
        'echo "Trying to pull reg:5000/i:1..." >&2\n'
        'echo "Error: initializing source docker://reg:5000/i:1: manifest unknown" >&2\n'
        "exit 125\n",
    )
    told: list[tuple[str, bool]] = []
    problem = image_pull.pull(runtime, "reg:5000/i:1", [], 30, lambda t, d: told.append((t, d)))
    assert problem == (
        "cannot pull image reg:5000/i:1: initializing source docker://reg:5000/i:1: "
        "manifest unknown"
    )
    assert not any(done for _, done in told)


def test_a_hung_pull_is_killed_at_its_limit_and_said_so(tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    runtime = _runtime(tmp_path, f"echo $$ > {pidfile}\nexec sleep 600\n")
    problem = image_pull.pull(runtime, "reg:5000/i:1", [], 1.5)
    assert problem == (
        "pulling image reg:5000/i:1 did not finish in 1.5 s "
        "(ringleader server --image-pull-timeout)"
    )
    pid = int(pidfile.read_text())
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        pass
    else:
        raise AssertionError(f"the pull (pid {pid}) outlived its limit")


def test_the_server_reads_pulling_then_pulled_from_the_supervisors_record() -> None:
    state = {"phase": "Starting", "attempt": 0, "progress": {
        "b": {"text": "pulling image i: layer 1 (52d32e69cb63), 3 s", "done": False},
        "a": {"text": "pulled image i in 2.0 s (310 MB)", "done": True},
    }}  # fmt: skip
    assert pull_progress(state) == (
        "Pulling",
        "a: pulled image i in 2.0 s (310 MB)\nb: pulling image i: layer 1 (52d32e69cb63), 3 s",
    )
    status = status_of(state, [], this_node="a", phase_of=lambda p: "Initializing")
    assert (status.reason, status.pulled) == ("Pulling", "")
    state["progress"]["b"] = {"text": "pulled image i in 4.0 s (310 MB)", "done": True}
    state["phase"] = "Running"
    status = status_of(state, [], this_node="a", phase_of=lambda p: "Running")
    assert status.reason == "" and status.pulled.endswith("b: pulled image i in 4.0 s (310 MB)")
    assert pull_progress({"phase": "Starting"}) == ("", "")


def test_one_host_done_while_the_gang_starts_is_not_yet_pulled() -> None:
    """A host that has said nothing yet may still pull (its agent is slower to
    start): while the launch is Starting the image is Pulling, even when every host
    heard from is done, so Pulled is recorded once, not Pulled, Pulling, Pulled
    (seen once in six runs of a 3-host gang)."""
    state = {"phase": "Starting", "attempt": 0, "progress": {
        "a": {"text": "pulled image i in 2.0 s (310 MB)", "done": True},
    }}  # fmt: skip
    status = status_of(state, [], this_node="a", phase_of=lambda p: "Initializing")
    assert (status.reason, status.pulled) == ("Pulling", "")
    assert status.message == "a: pulled image i in 2.0 s (310 MB)"
    state["progress"]["b"] = {"text": "pulling image i: layer 1 (52d32e69cb63), 1 s", "done": False}
    assert status_of(state, [], this_node="a", phase_of=lambda p: "Initializing").reason == (
        "Pulling"
    )
    state["progress"]["b"] = {"text": "pulled image i in 3.0 s (310 MB)", "done": True}
    state["phase"] = "Running"  # every agent is ready: no host pulls any more
    status = status_of(state, [], this_node="a", phase_of=lambda p: "Running")
    assert (
        status.pulled == "a: pulled image i in 2.0 s (310 MB)\nb: pulled image i in 3.0 s (310 MB)"
    )


def test_an_agent_pulling_longer_than_its_heartbeat_timeout_still_hears_the_heartbeat(
    tmp_path: Path,
) -> None:
    """The agent pulls while it acts on ``setup``; the supervisor's pings go on arriving
    meanwhile, and a pull longer than the heartbeat timeout must not read as a silent
    supervisor (CI saw a host's agent stop itself mid-pull, and the gang start again)."""
    gate = tmp_path / "gate"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # `image exists`: not here; `pull`: until the test opens the gate; `inspect`: a size.
    body = ('case "$1" in\n'
            "image) exit 1 ;;\n"
            f"pull) while [ ! -e {gate} ]; do sleep 0.1; done ;;\n"
            "inspect) echo 1000000 ;;\n"
            "esac\n")  # fmt: skip
    runtime = _runtime(bin_dir, body)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    agent = subprocess.Popen(
        [sys.executable, "-m", "ringleader.launch.agent", "--job-id", "rl-pull",
         "--heartbeat-timeout", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, bufsize=0,  # select sees all
    )  # fmt: skip
    assert agent.stdin is not None and agent.stdout is not None
    stop = threading.Event()

    def send(op: str, **fields: object) -> None:
        agent.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())  # type: ignore[union-attr]
        agent.stdin.flush()  # type: ignore[union-attr]

    def ping() -> None:  # the supervisor's heartbeat, as it sends it
        while not stop.wait(0.2):
            try:
                send("ping")
            except (BrokenPipeError, ValueError):
                return

    try:
        container = {"image": "reg.example:5000/i:1", "runtime": runtime, "pull_timeout": 120}
        send("setup", cwd=str(tmp_path), tmpdir=str(tmp_path), container=container)
        threading.Thread(target=ping, daemon=True).start()
        seen: list[dict[str, object]] = []
        with selectors.DefaultSelector() as sel:
            sel.register(agent.stdout, selectors.EVENT_READ)
            # Well past the timeout (pings heard), the pull still going: then let it end.
            while not any(m.get("op") == "progress" for m in seen) or len(seen) < 3:
                assert sel.select(60), seen
                line = agent.stdout.readline()
                assert line, f"the agent ended mid-pull: {seen}"
                seen.append(json.loads(line))
            assert agent.poll() is None, seen
            gate.touch()
            while not any(m.get("op") in ("ready", "fatal") for m in seen):
                assert sel.select(60), seen
                line = agent.stdout.readline()
                assert line, f"the agent ended: {seen}"
                seen.append(json.loads(line))
        assert seen[-1]["op"] == "ready", seen
    finally:
        stop.set()
        agent.kill()
        agent.wait()


def test_an_agent_whose_supervisor_goes_mid_pull_leaves_no_pull_running(
    tmp_path: Path,
) -> None:
    """The supervisor goes (its pipe closes) while this host's agent pulls: the agent
    stops on its watchdog and ends the pull with it, not leaving it to run on."""
    pid_file = tmp_path / "pull.pid"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # `image exists`: not here; `pull`: says its pid, then hangs (one process: exec).
    runtime = _runtime(bin_dir, f'case "$1" in\nimage) exit 1 ;;\n'
                       f"pull) echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file}"
                       " && exec sleep 3600 ;;\nesac\n")  # fmt: skip
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    agent = subprocess.Popen(
        [sys.executable, "-m", "ringleader.launch.agent", "--job-id", "rl-gone",
         "--heartbeat-timeout", "1"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, env=env,
    )  # fmt: skip
    assert agent.stdin is not None
    try:
        container = {"image": "reg.example:5000/i:1", "runtime": runtime, "pull_timeout": 600}
        setup = {"op": "setup", "cwd": str(tmp_path), "tmpdir": str(tmp_path),
                 "container": container}  # fmt: skip
        agent.stdin.write((json.dumps(setup) + "\n").encode())
        agent.stdin.close()  # the supervisor is gone
        pid = int(wait_until(lambda: pid_file.exists() and pid_file.read_text(), 60, "a pull"))
        assert agent.wait(timeout=60) != 0
        wait_until(lambda: not _alive(pid), 30, "the pull to end with its agent")
    finally:
        agent.kill()
        agent.wait()
        if pid_file.exists() and _alive(pulled := int(pid_file.read_text())):
            os.kill(pulled, 9)  # what the test started, should it have been left


def _alive(pid: int) -> bool:
    """A process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            return stat_file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
