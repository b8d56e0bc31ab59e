"""The test-host fixture itself: real namespaces, real sshd, real host-key checking.

Why: every multihost launcher test trusts this fixture; if it silently skipped host-key
verification or leaked namespaces, those tests would prove nothing (or poison later runs).
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from ringleader.cluster.testhosts import TestHost, TestHostError, sshd
from tests.fixtures.testhosts import (
    TestHostNetwork,
    cleanup_stale,
    make_test_hosts_fixture,  # noqa: F401  (provides the `make_test_hosts` fixture)
    require_test_hosts,
    test_hosts_fixture,  # noqa: F401  (provides the `test_hosts` fixture)
)

pytestmark = pytest.mark.multihost

MakeHosts = Callable[..., TestHostNetwork]


def _links() -> set[str]:
    return set(os.listdir("/sys/class/net"))


def _netns() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_batch_ssh_reaches_each_host_at_its_own_address(test_hosts: TestHostNetwork) -> None:
    net = test_hosts
    assert len(net.hosts) == 3
    assert net.interface == "eth0"
    addresses = {h.address for h in net.hosts}
    assert len(addresses) == 3
    assert net.bridge_address not in addresses
    assert net.unreachable_address not in addresses
    for h in net.hosts:
        assert h.sshd_pid is not None and _alive(h.sshd_pid)
        result = net.ssh(h, "ip -o -4 addr show eth0; ip route show default")
        assert result.returncode == 0, result.stderr
        assert f"inet {h.address}/24" in result.stdout
        assert f"default via {net.bridge_address}" in result.stdout
        for other in addresses - {h.address}:
            assert other not in result.stdout
    # Host keys come from a file we wrote; ssh may not have appended anything to it.
    lines = net.known_hosts.read_text().splitlines()
    assert [line.split()[:2] for line in lines] == [[h.address, "ssh-ed25519"] for h in net.hosts]
    assert "StrictHostKeyChecking yes" in net.ssh_config.read_text()


def test_hosts_reach_each_others_sshd(test_hosts: TestHostNetwork) -> None:
    net = test_hosts
    probe = (
        "import socket, sys;"
        "s = socket.create_connection((sys.argv[1], 22), timeout=5);"
        "print(s.recv(64).decode().strip())"
    )
    target = net.hosts[2].address
    result = subprocess.run(
        net.netns_argv(0, sys.executable, "-c", probe, target),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("SSH-2.0-")


def _lookups(net: TestHostNetwork, host: TestHost, queries: list[list[str]]) -> list[str]:
    """What ``getent`` answers on ``host`` for each query (its status when it fails),
    in one ssh session: every session costs a handshake."""
    script = "; ".join(f"{shlex.join(['getent', *q])} || echo status $?; echo --" for q in queries)
    result = net.ssh(host, script)
    assert result.returncode == 0, result.stderr
    return result.stdout.split("--\n")[:-1]


def test_each_host_names_the_network_from_its_own_files_and_asks_no_dns(
    test_hosts: TestHostNetwork,
) -> None:
    # The test network routes to no DNS server: a lookup that reached one waited out the
    # resolver (10 s; gloo's TCPStore names each peer), so names come from /etc/hosts.
    net = test_hosts
    machine = (Path("/etc/hosts").read_text(), Path("/etc/resolv.conf").read_text())
    for h in net.hosts:
        result = net.ssh(h, "cat /etc/resolv.conf; hostname")
        assert result.returncode == 0, result.stderr
        assert not [w for w in result.stdout.splitlines() if w.split()[:1] == ["nameserver"]]
        assert result.stdout.split()[-1] == h.address
        queries = [["hosts", net.bridge_address], ["hosts", net.unreachable_address]]
        for other in net.hosts:
            queries += [
                ["hosts", other.address],
                # as a dual-stack listener (gloo's TCPStore) sees an IPv4 peer: named too
                ["hosts", f"::ffff:{other.address}"],
                # while a host's name still resolves to its IPv4 address alone
                ["ahosts", other.netns],
            ]
        bridge, unreachable, *per_host = _lookups(net, h, queries)
        assert bridge.split() == [net.bridge_address, net.bridge]
        assert unreachable.split() == ["status", "2"]  # not found: asked of no one
        answers = [per_host[i : i + 3] for i in range(0, len(per_host), 3)]
        for other, (named, mapped, found) in zip(net.hosts, answers, strict=True):
            assert named.split() == [other.address, other.address, other.netns]
            assert mapped.split() == [f"::ffff:{other.address}", other.address]
            assert {line.split()[0] for line in found.splitlines()} == {other.address}
    # Only the hosts' sessions see them: the machine's own files are as they were.
    assert (Path("/etc/hosts").read_text(), Path("/etc/resolv.conf").read_text()) == machine
    assert net.bridge_address not in machine[0]


def test_root_sessions_run_the_networks_shell_setup_not_the_machines(
    test_hosts: TestHostNetwork,
) -> None:
    # Debian's bash runs ~/.bashrc for each ssh command; the machine's (here: pyenv's
    # init, which rehashes under a lock file shared by every host) hung every session
    # for 60 s once a killed session left its lock behind. Each host's root gets the
    # network's setup: the PATH that built the network, nothing else run.
    net = test_hosts
    root_bashrc = Path(pwd.getpwuid(0).pw_dir) / ".bashrc"
    if not root_bashrc.is_file():
        pytest.skip("this machine's root has no ~/.bashrc to stand in for")
    machine = root_bashrc.read_text()
    for h in net.hosts:
        result = net.ssh(h, 'cat "$HOME/.bashrc"; printf "PATH=%s\\n" "$PATH"')
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith(sshd.ROOT_BASHRC)
        assert f"PATH={os.environ['PATH']}" in result.stdout.splitlines()
    assert root_bashrc.read_text() == machine  # the machine's own is as it was


def test_unknown_or_wrong_host_key_is_rejected_quickly(
    test_hosts: TestHostNetwork, tmp_path: Path
) -> None:
    net = test_hosts
    empty = tmp_path / "empty_known_hosts"
    empty.write_text("")
    # host 1's genuine key, filed under host 0's address: a man-in-the-middle lookalike
    wrong = tmp_path / "wrong_known_hosts"
    key = net.known_hosts.read_text().splitlines()[1].split()[1:]
    wrong.write_text(f"{net.hosts[0].address} {' '.join(key)}\n")
    for known_hosts in (empty, wrong):
        result = net.ssh(0, "true", timeout=20, options={"UserKnownHostsFile": str(known_hosts)})
        assert result.returncode == 255
        assert "Host key verification failed" in result.stderr
    assert empty.read_text() == ""  # nothing learnt behind our back
    assert net.ssh(0, "true").returncode == 0


def test_hidden_dirs_are_missing_on_that_host_only(
    make_test_hosts: MakeHosts, tmp_path: Path
) -> None:
    shared = tmp_path / "shared"
    (shared / "secret").mkdir(parents=True)
    (shared / "visible").mkdir()
    (shared / "note.txt").write_text("hello")
    (shared / "link").symlink_to("visible")
    # a sibling of the fixture's own directory: its parent (/tmp) must stay usable
    in_tmp = Path(tempfile.mkdtemp(prefix="rlt-hidden-test-"))
    try:
        net = make_test_hosts(2, hidden_dirs={1: [shared / "secret", in_tmp]})
        for path in (shared / "secret", in_tmp):
            assert net.ssh(0, "test", "-d", str(path)).returncode == 0
            assert net.ssh(1, "test", "-e", str(path)).returncode == 1
        listing = net.ssh(1, f"ls -A {shared}; cat {shared}/note.txt")
        assert listing.stdout.split() == ["link", "note.txt", "visible", "hello"]
        # the rest is the real filesystem, not a copy: writes show through
        assert net.ssh(1, f"echo hi > {shared}/link/w && test -d /tmp").returncode == 0
        assert (shared / "visible" / "w").read_text() == "hi\n"
        # a host with its own mounts names the network from its own files too
        named = net.ssh(1, "getent", "hosts", net.hosts[0].address).stdout.split()
        assert named == [net.hosts[0].address, net.hosts[0].address, net.hosts[0].netns]
        # a restarted sshd hides it again
        net.kill_sshd(1)
        net.start_sshd(1)
        assert net.ssh(1, "test", "-e", str(shared / "secret")).returncode == 1
    finally:
        in_tmp.rmdir()


def test_take_down_fails_within_connect_timeout_and_bring_up_restores(
    test_hosts: TestHostNetwork,
) -> None:
    net = test_hosts
    assert net.ssh(1, "true").returncode == 0
    net.take_down(1)
    # ssh gives up by its ConnectTimeout: the call's limit (30 s) is far above it
    result = net.ssh(1, "true", timeout=30)
    assert result.returncode == 255
    assert "timed out" in result.stderr, result.stderr
    assert net.ssh(0, "true").returncode == 0  # the others are unaffected
    net.bring_up(1)
    result = net.ssh(1, "true")
    assert result.returncode == 0, result.stderr


def test_unreachable_address_fails_within_connect_timeout(test_hosts: TestHostNetwork) -> None:
    net = test_hosts
    result = net.ssh(net.unreachable_address, "true", timeout=30)
    assert result.returncode == 255
    assert "connect to host" in result.stderr, result.stderr  # not a login refused


def test_kill_sshd_refuses_connections_until_restarted(test_hosts: TestHostNetwork) -> None:
    net = test_hosts
    old = net.hosts[2].sshd_pid
    assert old is not None
    net.kill_sshd(2)
    assert net.hosts[2].sshd_pid is None and not _alive(old)
    result = net.ssh(2, "true")
    assert result.returncode == 255
    assert "Connection refused" in result.stderr
    new = net.start_sshd(2)
    assert new != old
    assert net.ssh(2, "true").returncode == 0


def test_password_auth_option_reaches_sshd(make_test_hosts: MakeHosts) -> None:
    net = make_test_hosts(1, password_auth=True)
    h = net.hosts[0]
    effective = subprocess.run(
        net.netns_argv(h, "/usr/sbin/sshd", "-T", "-f", str(h.dir / "sshd_config")),
        capture_output=True,
        text=True,
        timeout=30,
    ).stdout
    assert "passwordauthentication yes" in effective
    assert "permitrootlogin without-password" in effective  # root stays key-only


def test_teardown_leaves_nothing_behind() -> None:
    require_test_hosts()
    with TestHostNetwork(2) as net:
        sshd_pids = [h.sshd_pid for h in net.hosts]
        # an orphan inside a namespace: not our child, only `ip netns pids` finds it
        orphan = net.ssh(0, "nohup sleep 300 >/dev/null 2>&1 & echo $!")
        orphan_pid = int(orphan.stdout)
        assert _alive(orphan_pid)
        names = {net.bridge} | {h.veth for h in net.hosts}
        assert names <= _links()
    assert not _alive(orphan_pid)
    assert not any(pid is not None and _alive(pid) for pid in sshd_pids)
    assert not {h.netns for h in net.hosts} & _netns()
    assert not names & _links()
    assert not net.dir.exists()
    net.close()  # idempotent


def test_failed_setup_is_torn_down() -> None:
    require_test_hosts()
    net = TestHostNetwork(2, hidden_dirs={1: ["/tmp"]})  # parent is /: refused at sshd start
    with pytest.raises(ValueError, match="cannot hide"):
        net.start()
    assert net.hosts[0].process is not None  # host 0's sshd had been started ...
    assert not _alive(net.hosts[0].process.pid)  # ... and was stopped
    assert not {h.netns for h in net.hosts} & _netns()
    assert not ({net.bridge} | {h.veth for h in net.hosts}) & _links()
    assert not net.dir.exists()


def test_stale_leftovers_of_dead_runs_are_removed() -> None:
    require_test_hosts()
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = f"rlt{dead.pid:x}-0"
    live = f"rlt{os.getpid():x}-fe"  # a live run's resources must survive
    for tag in (stale, live):
        subprocess.run(["ip", "link", "add", f"{tag}br", "type", "bridge"], check=True)
        subprocess.run(["ip", "netns", "add", f"{tag}h0"], check=True)
    try:
        cleanup_stale()
        assert f"{stale}br" not in _links() and f"{stale}h0" not in _netns()
        assert f"{live}br" in _links() and f"{live}h0" in _netns()
    finally:
        for tag in (stale, live):
            subprocess.run(["ip", "link", "del", f"{tag}br"], capture_output=True)
            subprocess.run(["ip", "netns", "del", f"{tag}h0"], capture_output=True)


@pytest.mark.parametrize(("owner", "mode"), [(65534, 0o777), (0, 0o777), (0, 0o755)])
def test_a_directory_made_by_someone_else_is_refused_never_written_into(
    owner: int, mode: int
) -> None:
    """The test network's directory is predictable (``/tmp/rlt<pid>-<seq>-net``): one a
    local user made first would let them swap authorized_keys or mounts.sh, which root
    runs, so it is refused, and nothing is made or written."""
    require_test_hosts()
    net = TestHostNetwork(1)
    net.dir.mkdir()
    os.chown(net.dir, owner, owner)
    os.chmod(net.dir, mode)
    planted = net.dir / "authorized_keys"
    planted.write_text("ssh-ed25519 AAAA planted\n")
    try:
        with pytest.raises(TestHostError, match="not a directory test hosts made"):
            net.start()
        assert os.listdir(net.dir) == ["authorized_keys"]
        assert planted.read_text() == "ssh-ed25519 AAAA planted\n"
        assert not ({net.bridge} | {h.veth for h in net.hosts}) & _links()
        assert not {h.netns for h in net.hosts} & _netns()
    finally:
        net.close()
        shutil.rmtree(net.dir, ignore_errors=True)


def test_a_leftover_directory_of_ours_is_made_anew() -> None:
    """Root's, mode 0700: a dead run's (its pid since reused); emptied, then used."""
    require_test_hosts()
    net = TestHostNetwork(1)
    net.dir.mkdir(mode=0o700)
    (net.dir / "stale").write_text("from a dead run\n")
    with net:
        assert not (net.dir / "stale").exists()
        assert net.ssh(0, "true").returncode == 0
    assert not net.dir.exists()
