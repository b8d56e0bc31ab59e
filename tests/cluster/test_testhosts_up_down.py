"""``ringleader testhosts up/down/list`` as a user runs them: real namespaces, real sshd.

Why: ``up`` changes the machine (namespaces, links, sshd processes, files) and leaves
it so after it exits; the only proof that ``down`` undoes it is to look, after every
kind of end: a normal one, an ``up`` killed with -9 midway, a host that failed to
come up. And what ``up`` hands the user (hosts.json, an ssh config) must carry
``doctor`` and a real 2-host ``launch`` with gloo's allreduce.

Every test gives ``up`` a home of its own (``RINGLEADER_HOME``), so its tag is its
own: a user's network and parallel workers' are never touched.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.cluster.testhosts import kept
from ringleader.cluster.testhosts.links import (
    CLAIMS_DIR,
    ProcessId,
    TestHostError,
    cleanup_stale,
    remove_tag,
    run,
    tag_objects,
)
from tests.cli.conftest import home_env
from tests.conftest import wait_until
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
    require_test_hosts,
)

pytestmark = pytest.mark.multihost

ALLREDUCE = """\
import torch, torch.distributed as dist
dist.init_process_group("gloo")
total = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(total)
print(f"rank {dist.get_rank()} of {dist.get_world_size()}: sum {total.item():g}", flush=True)
dist.destroy_process_group()
"""


def cli(
    home: Path, *args: str, timeout: float = 120, **extra: str
) -> subprocess.CompletedProcess[str]:
    """``ringleader ARGS`` as a user with ``home`` runs it at 80 columns."""
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        env=home_env(home, COLUMNS="80", **extra),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def state_of(home: Path) -> dict:
    return json.loads((home / "testhosts" / "state.json").read_text())


def recorded_sshds(state: dict) -> list[ProcessId]:
    return [ProcessId(h["sshd"]["pid"], h["sshd"]["start"]) for h in state["hosts"] if h["sshd"]]


def claims_of(home: Path) -> list[str]:
    """Tags claimed for ``home`` (other tests' claims come and go beside them)."""
    mine = kept.state_dir(home)
    if not CLAIMS_DIR.is_dir():
        return []
    return sorted(p.name for p in CLAIMS_DIR.iterdir() if kept.claimed_by(p.name) == mine)


def assert_nothing_left(home: Path, state: dict) -> None:
    """No namespace or link of the tag, no recorded sshd, no files, no claim."""
    assert_tag_gone(state["tag"], home)
    assert not [p for p in recorded_sshds(state) if p.alive()]
    assert not (home / "testhosts").exists()


def assert_tag_gone(tag: str, home: Path) -> None:
    """No namespace, link or claim of ``tag`` for ``home``. Once freed, a parallel
    worker's ``up`` may take the tag again: its claim comes before its objects and
    goes after them, so objects seen while another home's claim stands are its."""
    objects = tag_objects(tag)
    owner = kept.claimed_by(tag)
    assert owner != kept.state_dir(home) and claims_of(home) == []
    if owner is None:
        assert objects == ([], []), objects


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """A user's home for ``up``; whatever a failed test left up is taken down after it."""
    require_test_hosts()
    path = tmp_path / "home"
    yield path
    if (path / "testhosts" / "state.json").exists():
        cli(path, "testhosts", "down")


def test_up_then_doctor_and_a_two_host_launch_then_down(home: Path, tmp_path: Path) -> None:
    made = cli(home, "testhosts", "up", "2")
    assert made.returncode == 0, made.stderr
    state = state_of(home)
    tag, hosts = state["tag"], state["hosts"]
    assert state["phase"] == "up" and tag.startswith("rlu") and len(hosts) == 2
    said = made.stdout
    # Every change is named: claim, state, bridge, each namespace, veth, address, sshd pid.
    assert f"tag {tag}, claimed by {CLAIMS_DIR / tag}" in said
    assert f"bridge {tag}br {state['bridge_address']}/24" in said
    for h in hosts:
        line = (
            f"  host {h['index']}: netns {h['netns']}, veth {h['veth']}, eth0 {h['address']}/24,"
            f" sshd pid {h['sshd']['pid']}\n"
        )
        assert line in said, said
    assert "Undo all of it: ringleader testhosts down" in said
    # 80 columns, but for a line with a path in it (printed whole, to copy)
    assert all(len(line) <= 80 or str(home) in line for line in said.splitlines()), said
    hostfile, config = home / "testhosts" / "hosts.json", home / "testhosts" / "ssh_config"
    assert json.loads(hostfile.read_text()) == [
        {"ssh": h["address"], "ips": [h["address"]]} for h in hosts
    ]
    assert f"export RINGLEADER_SSH_CONFIG={config}" in said
    assert f"ringleader doctor --hostfile {hostfile}" in said

    project = tmp_path / "project"
    project.mkdir()
    (project / "allreduce.py").write_text(ALLREDUCE)
    user = home_env(home, COLUMNS="80", RINGLEADER_SSH_CONFIG=str(config))
    doctor = subprocess.run(
        [sys.executable, "-m", "ringleader", "doctor", "--hostfile", str(hostfile),
         "--no-bandwidth", "--min-free-gb", "0.01"],
        env=user, cwd=project, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert doctor.returncode == 0 and "all 2 hosts ready" in doctor.stdout, doctor.stdout
    launched = subprocess.run(
        [sys.executable, "-m", "ringleader", "launch", "--hostfile", str(hostfile), "--",
         "python", "allreduce.py"],
        env=user, cwd=project, capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert launched.returncode == 0, launched.stderr[-3000:]
    for h in hosts:  # one rank on each host, at its address, over eth0 (gloo's interface)
        i, address = h["index"], h["address"]
        assert f"[{i}/2 {address}] rank {i} of 2: sum 3" in launched.stdout, launched.stdout
        assert f"{address}: ranks {i}, interface eth0" in launched.stderr

    listed = cli(home, "testhosts", "list")
    assert listed.returncode == 0 and f"Test hosts {tag}: up\n" in listed.stdout, listed.stdout
    down = cli(home, "testhosts", "down")
    assert down.returncode == 0, down.stderr
    for p in recorded_sshds(state):
        assert f"stopped sshd pid {p.pid}" in down.stdout
    assert f"deleted bridge {tag}br" in down.stdout and "Nothing of them is left." in down.stdout
    assert_nothing_left(home, state)


def test_up_twice_is_refused_and_down_with_nothing_up_changes_nothing(home: Path) -> None:
    idle = cli(home, "testhosts", "down")
    assert idle.returncode == 0 and "nothing to take down" in idle.stdout, idle.stderr
    assert not home.exists()
    assert cli(home, "testhosts", "up", "1").returncode == 0
    state = state_of(home)
    before = tag_objects(state["tag"]), claims_of(home)
    again = cli(home, "testhosts", "up", "1")
    assert again.returncode == 5, again.stderr
    assert f"test hosts {state['tag']} are already up" in again.stderr
    assert "ringleader testhosts down" in again.stderr and again.stdout == ""
    assert (tag_objects(state["tag"]), claims_of(home)) == before
    assert state_of(home) == state
    assert cli(home, "testhosts", "down").returncode == 0
    assert cli(home, "testhosts", "down").returncode == 0  # again: nothing, and says so
    assert_nothing_left(home, state)


def _start_up(home: Path, hosts: int) -> subprocess.Popen[str]:
    """``testhosts up HOSTS`` as a process whose lines the test reads as they come."""
    env = home_env(home, COLUMNS="80", PYTHONUNBUFFERED="1")
    return subprocess.Popen(
        [sys.executable, "-m", "ringleader", "testhosts", "up", str(hosts)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def test_down_removes_what_an_up_killed_midway_had_made(home: Path) -> None:
    up = _start_up(home, 8)
    assert up.stdout is not None
    for line in up.stdout:  # the first host's sshd runs; seven hosts are still to come
        if line.startswith("  host 0:"):
            break
    up.send_signal(signal.SIGKILL)
    up.wait(timeout=30)
    state = state_of(home)
    assert state["phase"] == "creating" and state["creator"]["pid"] == up.pid
    assert recorded_sshds(state) and all(p.alive() for p in recorded_sshds(state))
    # A process inside one of its namespaces (as a login or a rank would be).
    netns = state["hosts"][0]["netns"]
    inside = subprocess.Popen(["ip", "netns", "exec", netns, "sleep", "300"])
    wait_until(lambda: str(inside.pid) in run("ip", "netns", "pids", netns).stdout, 10, "sleep")

    listed = cli(home, "testhosts", "list")
    assert "half-made: its `up` was stopped" in listed.stdout, listed.stdout
    refused = cli(home, "testhosts", "up", "2")
    assert refused.returncode == 5 and "stopped midway" in refused.stderr, refused.stderr
    down = cli(home, "testhosts", "down")
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"processes left in {netns} (logins, ranks): killed" in down.stdout
    assert inside.wait(timeout=30) == -signal.SIGKILL
    assert_nothing_left(home, state)


def test_ctrl_c_during_up_undoes_what_it_had_made(home: Path) -> None:
    up = _start_up(home, 8)
    assert up.stdout is not None
    said = []
    for line in up.stdout:
        said.append(line)
        if line.startswith("  host 1:"):
            state = state_of(home)  # what it has made so far, as down would read it
            up.send_signal(signal.SIGINT)
            break
    rest, err = up.communicate(timeout=60)
    assert up.returncode == 130 and "error: interrupted" in err, err
    assert "  undone: every namespace, link and sshd above" in rest, "".join(said) + rest
    assert len(recorded_sshds(state)) == 2
    assert_nothing_left(home, state)


def test_a_host_that_fails_undoes_the_hosts_made_before_it(home: Path) -> None:
    said: list[str] = []

    def third_host_fails(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
        if argv[:3] == ("ip", "netns", "add") and argv[3].endswith("h2"):
            raise TestHostError(f"{' '.join(argv)}: injected failure")
        return run(*argv, **kw)  # type: ignore[arg-type]

    with pytest.raises(kept.SetupFailed, match="injected failure"):
        kept.up(3, home, said.append, runner=third_host_fails)
    tag = said[0].split()[1].rstrip(",")
    pids = [int(line.rsplit(" ", 1)[1]) for line in said if line.startswith("host ")]
    assert len(pids) == 2  # hosts 0 and 1 ran their sshd before host 2 failed
    assert said[-1].startswith("undone: every namespace, link and sshd above")
    assert_tag_gone(tag, home)
    assert not any(Path(f"/proc/{pid}").exists() for pid in pids)  # reaped, not just dead
    assert not (home / "testhosts").exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["0"], "N: must be between 1 and 32 hosts, got 0"),
        (["300"], "N: must be between 1 and 32 hosts, got 300"),
        (["three"], "N: 'three' is not a whole number"),
        (["3", "--bogus"], "no such option: --bogus"),
        ([], "missing argument N"),
    ],
)
def test_bad_input_names_the_argument_and_makes_nothing(
    home: Path, args: list[str], named: str
) -> None:
    done = cli(home, "testhosts", "up", *args)
    assert done.returncode == 2 and named in done.stderr, done.stderr
    assert done.stdout == "" and "Traceback" not in done.stderr
    assert not home.exists()
    assert claims_of(home) == []


@pytest.mark.parametrize("args", [["up", "2"], ["down"]])
def test_not_root_exits_2_saying_so(home: Path, args: list[str]) -> None:
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    done = subprocess.run(
        [*nobody, sys.executable, "-m", "ringleader", "testhosts", *args],
        env=home_env(home, COLUMNS="80"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"`ringleader testhosts {args[0]}` needs root" in done.stderr
    assert f"fix: run it as root: sudo ringleader testhosts {' '.join(args)}" in done.stderr
    assert not home.exists()


def test_homes_and_test_runs_each_keep_their_own_network(
    home: Path, tmp_path: Path, make_test_hosts
) -> None:
    other = tmp_path / "other-home"
    try:
        assert cli(home, "testhosts", "up", "1").returncode == 0
        assert cli(other, "testhosts", "up", "1").returncode == 0
        mine, theirs = state_of(home), state_of(other)
        net: TestHostNetwork = make_test_hosts(1)  # a test run's, beside them
        assert len({mine["tag"], theirs["tag"], net.tag}) == 3
        addresses = {mine["hosts"][0]["address"], theirs["hosts"][0]["address"]}
        assert len(addresses | {net.hosts[0].address}) == 3  # three subnets
        cleanup_stale()  # a test run's sweep leaves users' networks alone
        assert all(tag_objects(s["tag"])[0] for s in (mine, theirs))
        listed = cli(home, "testhosts", "list")
        assert f"Test hosts {theirs['tag']} of another home are up here" in listed.stdout
        assert cli(home, "testhosts", "down").returncode == 0
        assert_nothing_left(home, mine)
        again = cli(other, "testhosts", "list")
        assert f"Test hosts {theirs['tag']}: up\n" in again.stdout, again.stdout
        assert net.ssh(0, "true").returncode == 0
    finally:
        cli(other, "testhosts", "down")
    assert_nothing_left(other, theirs)


def test_down_finds_hosts_whose_state_file_was_deleted(home: Path) -> None:
    assert cli(home, "testhosts", "up", "2").returncode == 0
    state = state_of(home)
    subprocess.run(["rm", "-rf", str(home / "testhosts")], check=True)
    down = cli(home, "testhosts", "down")  # the claim under /run still names this home
    assert down.returncode == 0, down.stdout + down.stderr
    assert f"{kept.claim_file(state['tag'])} names it" in down.stdout
    assert f"deleted bridge {state['tag']}br" in down.stdout
    assert_nothing_left(home, state)  # the sshds ended with their namespaces


def test_hosts_whose_sshds_are_gone_are_said_to_be(home: Path) -> None:
    """As after a reboot (or an sshd killed by hand): neither up nor list claim they run."""
    assert cli(home, "testhosts", "up", "2").returncode == 0
    state = state_of(home)
    for sshd in recorded_sshds(state):
        os.kill(sshd.pid, signal.SIGKILL)
        wait_until(lambda sshd=sshd: not sshd.alive(), 10, f"sshd {sshd.pid} gone")
    listed = cli(home, "testhosts", "list")
    assert "up, but host 0, 1 does not answer" in listed.stdout, listed.stdout
    again = cli(home, "testhosts", "up", "2")
    assert again.returncode == 5 and "none of their sshds runs" in again.stderr, again.stderr
    down = cli(home, "testhosts", "down")
    assert down.returncode == 0 and "stopped sshd" not in down.stdout, down.stdout
    assert_nothing_left(home, state)


# --- what root trusts: its own directories, its own state, its own claims ----------------

NOBODY = 65534


def forge(home: Path, tag: str = "rlu999999", sshd: dict | None = None, **fields: object) -> Path:
    """A state file as root would find it in ``home`` (a directory only root can change),
    written by hand: what a forged, corrupted or stale record looks like to ``down``."""
    directory = kept.state_dir(home)
    directory.mkdir(parents=True)
    os.chmod(directory, 0o700)
    gone = subprocess.Popen(["true"])
    gone.wait()
    host = {"index": 0, "netns": f"{tag}h0", "veth": f"{tag}v0", "address": "", "sshd": sshd}
    body = {
        "version": 1, "tag": tag, "n": 1, "phase": "up", "creator": {"pid": gone.pid,
        "start": 0}, "created": "2025-01-01T00:00:00+00:00", "bridge_address": None,
        "hosts": [host], **fields,
    }  # fmt: skip
    path = directory / "state.json"
    path.write_text(json.dumps(body))
    return path


def read_only_runner(calls: list[tuple[str, ...]]):
    """A runner that runs only what reads (``ip netns list/pids``) and records the rest,
    refused, so a test can show what ``down`` would have changed, without the change."""

    def runner(*argv: str, **kw: object) -> subprocess.CompletedProcess[str]:
        if argv[:3] in (("ip", "netns", "list"), ("ip", "netns", "pids")):
            return run(*argv, **kw)  # type: ignore[arg-type]
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1, "", "refused by the test")

    return runner


def claim_for(home: Path) -> str:
    """A tag claimed for ``home`` as ``up`` claims one (under the machine's lock)."""
    with kept._machine_lock():
        return kept._claim_tag(kept.state_dir(home), run)


@pytest.mark.parametrize(
    ("owner", "mode", "why"),
    [
        (NOBODY, 0o755, f"is owned by uid {NOBODY}, not root"),
        (0, 0o777, "is writable by users other than root (mode 777)"),
        (0, 0o775, "is writable by users other than root (mode 775)"),
    ],
)
def test_a_home_another_user_can_change_is_refused_before_anything_is_written(
    tmp_path: Path, owner: int, mode: int, why: str
) -> None:
    """With RINGLEADER_HOME below a user's directory (``sudo -E``), the user could
    rename root's ``testhosts/`` and put their own keys and scripts in its place."""
    require_test_hosts()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    os.chown(theirs, owner, owner)
    os.chmod(theirs, mode)
    home = theirs / "home"
    stranger = subprocess.Popen(["sleep", "300"])
    try:
        done = cli(home, "testhosts", "up", "1")
        assert done.returncode == 2, done.stdout + done.stderr
        assert f"RINGLEADER_HOME: {home / 'testhosts'} is not safe for root to use" in done.stderr
        assert f"{theirs} {why}" in done.stderr and "Traceback" not in done.stderr
        assert done.stdout == "" and not home.exists() and claims_of(home) == []
        # A state file such a user wrote there is not acted on either.
        started = ProcessId.of(stranger.pid)
        assert started is not None
        state = forge(home, sshd={"pid": started.pid, "start": started.start})
        refused = cli(home, "testhosts", "down")
        assert refused.returncode == 2 and f"{theirs} {why}" in refused.stderr, refused.stderr
        assert state.exists() and stranger.poll() is None
    finally:
        stranger.kill()
        stranger.wait()
        if claims_of(home):  # before the fix: up made hosts there
            cli(home, "testhosts", "down")


def test_down_refuses_a_tag_that_is_not_a_user_networks(home: Path) -> None:
    """``et`` would match ``eth0`` (``<tag>h<i>``): deleting it would cut the machine off."""
    state = forge(home, tag="et")
    calls: list[tuple[str, ...]] = []
    with pytest.raises(kept.Conflict, match=r"state.json is not a test-hosts state file: tag"):
        kept.down(home, print, runner=read_only_runner(calls))
    assert calls == [] and state.exists()  # nothing changed: not even the file


def test_down_signals_no_recorded_pid_outside_the_hosts_namespaces(home: Path) -> None:
    """A pid and its start time are world-readable: a record of them proves nothing."""
    stranger = subprocess.Popen(["sleep", "300"])
    tag = claim_for(home)
    try:
        started = ProcessId.of(stranger.pid)
        assert started is not None
        forge(home, tag=tag, sshd={"pid": started.pid, "start": started.start})
        said: list[str] = []
        assert kept.down(home, said.append)
        assert stranger.poll() is None, said  # still running
        assert not any("stopped sshd" in line for line in said)
        assert_tag_gone(tag, home)
        assert not (home / "testhosts").exists()
    finally:
        stranger.kill()
        stranger.wait()
        if kept.claimed_by(tag) == kept.state_dir(home):
            kept.claim_file(tag).unlink()


def test_down_leaves_alone_a_tag_no_claim_gives_this_home(home: Path) -> None:
    """Without a claim naming this home (after a reboot, or forged), the tag's
    objects are not provably ours: only the home's own files go."""
    tag = "rlu999999"  # beyond any tag `up` claims
    run("ip", "netns", "add", f"{tag}h0")
    try:
        forge(home, tag=tag)
        said: list[str] = []
        assert kept.down(home, said.append)
        assert tag_objects(tag) == ([f"{tag}h0"], []), said
        assert any("are left alone" in line for line in said), said
        assert not (home / "testhosts").exists()
    finally:
        run("ip", "netns", "del", f"{tag}h0", check=False)


def _limited() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))  # a runaway read fails fast


@pytest.mark.parametrize("kind", ["link to /dev/zero", "fifo", "too big"])
def test_a_state_file_that_is_not_one_is_refused_without_reading_it_whole(
    home: Path, kind: str
) -> None:
    path = forge(home)
    path.unlink()
    if kind == "link to /dev/zero":
        path.symlink_to("/dev/zero")
        why = "it is a symbolic link"
    elif kind == "fifo":
        os.mkfifo(path)
        why = "it is not a regular file"
    else:
        path.write_text('{"pad": "' + "x" * (1 << 20) + '"}')
        why = "it is larger than"
    for command in ("list", "down"):
        done = subprocess.run(
            [sys.executable, "-m", "ringleader", "testhosts", command],
            env=home_env(home, COLUMNS="80"), capture_output=True, text=True, timeout=30,
            preexec_fn=_limited,
        )  # fmt: skip
        assert done.returncode == 5, done.stdout + done.stderr[-2000:]
        assert f"{path} is not a test-hosts state file: {why}" in done.stderr
    assert os.path.lexists(path)


def test_an_up_that_cannot_undo_keeps_state_and_claim_for_down(home: Path) -> None:
    said: list[str] = []

    def host_1_fails_and_netns_del_too(*argv: str, **kw: object):
        if argv[:3] == ("ip", "netns", "add") and argv[3].endswith("h1"):
            raise TestHostError(f"{' '.join(argv)}: injected failure")
        if argv[:3] == ("ip", "netns", "del"):
            return subprocess.CompletedProcess(argv, 1, "", "injected: netns del failed")
        return run(*argv, **kw)  # type: ignore[arg-type]

    tag = None
    try:
        with pytest.raises(kept.SetupFailed, match="injected failure") as failed:
            kept.up(2, home, said.append, runner=host_1_fails_and_netns_del_too)
        tag = said[0].split()[1].rstrip(",")
        assert "undoing it: test-host teardown incomplete: injected" in str(failed.value)
        assert said[-1] == f"could not undo: {tag}h0; `ringleader testhosts down` retries"
        state = state_of(home)
        assert state["phase"] == "failed" and state["tag"] == tag
        assert kept.claimed_by(tag) == kept.state_dir(home)
        listed = cli(home, "testhosts", "up", "1")  # not a second network: down first
        assert listed.returncode == 5 and "could not remove all" in listed.stderr
        assert kept.down(home, said.append)
        assert_nothing_left(home, state)
    finally:
        if tag and kept.claimed_by(tag) in (None, kept.state_dir(home)):
            remove_tag(tag)
            kept.claim_file(tag).unlink(missing_ok=True)


def test_a_down_that_cannot_remove_all_keeps_state_and_claim_to_run_again(home: Path) -> None:
    """The claim goes only after nothing of the tag is left: freed earlier, another
    home's ``up`` could take the tag while ``down`` still looks for its leftovers."""
    assert cli(home, "testhosts", "up", "1").returncode == 0
    state = state_of(home)
    tag = state["tag"]

    def netns_del_fails(*argv: str, **kw: object):
        if argv[:3] == ("ip", "netns", "del"):
            return subprocess.CompletedProcess(argv, 1, "", "injected: netns del failed")
        return run(*argv, **kw)  # type: ignore[arg-type]

    said: list[str] = []
    with pytest.raises(
        kept.SetupFailed, match=f"not all gone: injected: netns del failed, {tag}h0"
    ):
        kept.down(home, said.append, runner=netns_del_fails)
    assert kept.claimed_by(tag) == kept.state_dir(home) and state_of(home) == state
    assert kept.down(home, said.append)
    assert_nothing_left(home, state)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"hosts": [1]}, "hosts[0]: 1 is not a host"),
        ({"hosts": [{"netns": "rlu999999h0"}]}, "hosts[0].index: None, not 0"),
        ({"created": "yesterday"}, "created: 'yesterday' is not an ISO date and time"),
        ({"n": "3"}, "n: '3' is not a host count (1..32)"),
        ({"creator": {"pid": 1}}, "creator: {'pid': 1} is not {pid, start}"),
    ],
)
def test_a_malformed_state_file_is_a_conflict_naming_the_field(
    home: Path, change: dict, named: str
) -> None:
    path = forge(home, **change)
    with pytest.raises(kept.Conflict) as refused:
        kept.Kept.read(path.parent)
    assert f"{path} is not a test-hosts state file: {named}" in str(refused.value)
    for command in ("list", "down"):
        done = cli(home, "testhosts", command)
        assert done.returncode == 5 and named in done.stderr, done.stdout + done.stderr
        assert "Traceback" not in done.stderr
    assert path.exists()


def test_a_home_with_a_space_and_a_percent_sign_works(tmp_path: Path) -> None:
    require_test_hosts()
    home = tmp_path / "my home 100%d"
    try:
        made = cli(home, "testhosts", "up", "1")
        assert made.returncode == 0, made.stdout + made.stderr
        state = state_of(home)
        config = home / "testhosts" / "ssh_config"
        address = state["hosts"][0]["address"]
        ssh = subprocess.run(
            ["ssh", "-F", str(config), address, "hostname"],
            capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert ssh.returncode == 0 and ssh.stdout.strip() == address, ssh.stderr
        assert cli(home, "testhosts", "down").returncode == 0
        assert_nothing_left(home, state)
    finally:
        if (home / "testhosts").exists():
            cli(home, "testhosts", "down")


def test_a_home_with_a_double_quote_is_refused_naming_it(tmp_path: Path) -> None:
    require_test_hosts()
    home = tmp_path / 'say "hi"'
    done = cli(home, "testhosts", "up", "1")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "RINGLEADER_HOME: " in done.stderr and "which an ssh config cannot quote" in done.stderr
    assert not home.exists() and claims_of(home) == []


def test_list_as_another_user_says_to_run_it_as_root(home: Path) -> None:
    forge(home)
    nobody = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
    done = subprocess.run(
        [*nobody, sys.executable, "-m", "ringleader", "testhosts", "list"],
        env=home_env(home, COLUMNS="80"), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 6, done.stdout + done.stderr
    assert f"cannot be read as this user (uid {NOBODY})" in done.stderr
    assert "run the command as root" in done.stderr and "remove" not in done.stderr
