"""Slow links for test hosts (issue 28 item 2): a tbf rate on both ends of each veth.

Why real transfers: that tc accepted a qdisc proves nothing about the link; a TCP
transfer between two hosts shows the rate holds each way (bytes/s bounds computed
from the transfer, wide: a loaded machine may send slower, never faster). And
``down`` (or ``rate none``) must leave no qdisc and no veth behind.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from ringleader.cluster.testhosts import kept, rate
from ringleader.cluster.testhosts.links import run, tag_objects
from tests.cli.conftest import home_env
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
    require_test_hosts,
)

SERVER = r"""
import socket, sys, time
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 5001)); s.listen(1); print("ready", flush=True)
c, _ = s.accept(); n = 0; first = None
while True:
    b = c.recv(1 << 20)
    if not b: break
    if first is None: first = time.perf_counter()
    n += len(b)
print(n, time.perf_counter() - first, flush=True)
"""
CLIENT = r"""
import socket, sys
c = socket.create_connection((sys.argv[1], 5001)); buf = b"x" * (1 << 16)
for _ in range(int(sys.argv[2])): c.sendall(buf)
c.close()
"""


def throughput(net: TestHostNetwork, src: int, dst: int, nbytes: int) -> float:
    """Bytes a second of one TCP transfer from host ``src`` to ``dst``, as the receiver
    counts them from its first byte to its last."""
    server = subprocess.Popen(
        net.netns_argv(dst, sys.executable, "-c", SERVER, net.address(dst)),
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert server.stdout is not None and server.stdout.readline().strip() == "ready"
        chunks = str(max(1, nbytes // 65536))
        argv = net.netns_argv(src, sys.executable, "-c", CLIENT, net.address(dst), chunks)
        subprocess.run(argv, check=True, timeout=120)
        received, seconds = server.stdout.readline().split()
        server.wait(timeout=30)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    assert int(received) == int(chunks) * 65536
    return int(received) / float(seconds)


def qdiscs(net_hosts: list[tuple[str, str]]) -> list[str]:
    """The tbf qdiscs on each (netns, veth)'s two ends, as ``tc`` lists them."""
    found = []
    for netns, veth in net_hosts:
        for argv in (("tc", "qdisc", "show", "dev", veth),
                     ("tc", "-n", netns, "qdisc", "show", "dev", "eth0")):  # fmt: skip
            found += [ln for ln in run(*argv, check=False).stdout.splitlines() if " tbf " in ln]
    return found


def test_rates_are_read_as_tc_reads_them_and_bad_ones_are_refused() -> None:
    assert [rate.parse_rate(t) for t in ("100mbit", "1gbit", "2.5Gbit", "500kbit", "10mbps")] == [
        100 * 10**6, 10**9, 25 * 10**8, 500_000, 80 * 10**6
    ]  # fmt: skip
    assert [rate.parse_rate(t) for t in ("none", "off", "0", "unlimited")] == [None] * 4
    for bad in ("", "fast", "100", "100mb", "-1mbit", "1kbit", "1tbit", "1e3mbit"):
        with pytest.raises(ValueError, match=r"rate|range"):
            rate.parse_rate(bad)
    texts = [rate.rate_text(b) for b in (10**8, 10**9, 25 * 10**8, 500_000, None)]
    assert texts == ["100mbit", "1gbit", "2.5gbit", "500kbit", "none"]


def test_bucket_lets_tcp_reach_the_rate_at_every_speed() -> None:
    """The bucket holds whole GSO segments with room; the queue about 100 ms of the rate."""
    slow, fast = rate.bucket(20 * 10**6), rate.bucket(10 * 10**9)
    assert slow.burst == 256 * 1024 and slow.limit == 2 * 2**20
    assert fast.burst == 10**10 // 8 // 250 and fast.limit == 10**10 // 8 // 10
    assert slow.args() == ["tbf", "rate", "20000000bit", "burst", "262144", "limit", "2097152"]


def test_a_rate_holds_each_way_and_none_removes_it(
    make_test_hosts: Callable[..., TestHostNetwork],
) -> None:
    net = make_test_hosts(2)
    bits = 20 * 10**6
    said = rate.set_rate(net.hosts, bits)
    assert said == [f"{h.veth} and {h.netns}:eth0: tbf rate 20mbit each way" for h in net.hosts]
    assert rate.rates(net.hosts) == [(bits, bits)] * 2
    for src, dst in ((0, 1), (1, 0)):
        per_second = throughput(net, src, dst, 4 * 2**20)
        # never above the rate (a little slack for the bucket's first burst), and near it
        assert 0.4 * bits / 8 < per_second < 1.15 * bits / 8, (src, dst, per_second * 8)
    assert rate.set_rate(net.hosts, 10**9)  # changed in place, no error
    assert rate.rates(net.hosts) == [(10**9, 10**9)] * 2
    rate.set_rate(net.hosts, None)
    assert rate.rates(net.hosts) == [(None, None)] * 2
    assert qdiscs([(h.netns, h.veth) for h in net.hosts]) == []
    assert throughput(net, 0, 1, 16 * 2**20) > 3 * bits / 8  # the link is fast again
    rate.set_rate(net.hosts, None)  # clearing a clear link is fine


def test_only_test_hosts_links_are_touched() -> None:
    with pytest.raises(ValueError, match="not a test host"):
        rate.set_rate([rate.Link("myns", "eth0")], 10**8, runner=_no_runner)


def _no_runner(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    raise AssertionError(f"ran {argv}")


def cli(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ringleader", *args],
        env=home_env(home, COLUMNS="80"), capture_output=True, text=True, timeout=180,
    )  # fmt: skip


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    require_test_hosts()
    path = tmp_path / "home"
    yield path
    if (path / "testhosts" / "state.json").exists():
        cli(path, "testhosts", "down")


@pytest.mark.multihost
def test_up_with_a_rate_then_rate_then_down_leaves_no_qdisc_nor_veth(home: Path) -> None:
    made = cli(home, "testhosts", "up", "2", "--rate", "50mbit")
    assert made.returncode == 0, made.stderr
    state = json.loads((home / "testhosts" / "state.json").read_text())
    tag, hosts = state["tag"], [(h["netns"], h["veth"]) for h in state["hosts"]]
    for netns, veth in hosts:
        assert f"  {veth} and {netns}:eth0: tbf rate 50mbit each way\n" in made.stdout
    assert len(qdiscs(hosts)) == 4 and all("rate 50Mbit" in q for q in qdiscs(hosts))
    assert "link rate: 50mbit each way" in cli(home, "testhosts", "list").stdout

    changed = cli(home, "testhosts", "rate", "1gbit")
    assert changed.returncode == 0 and f"{tag}: link rate 1gbit." in changed.stdout
    assert all("rate 1Gbit" in q for q in qdiscs(hosts)) and len(qdiscs(hosts)) == 4
    cleared = cli(home, "testhosts", "rate", "none")
    assert cleared.returncode == 0, cleared.stderr
    assert qdiscs(hosts) == []
    assert "link rate: none each way" in cli(home, "testhosts", "list").stdout

    assert cli(home, "testhosts", "rate", "100mbit").returncode == 0
    down = cli(home, "testhosts", "down")
    assert down.returncode == 0, down.stderr
    if kept.claimed_by(tag) is None:  # else a parallel test's `up` took the freed tag
        assert tag_objects(tag) == ([], [])  # no veth, no netns, no bridge
    assert qdiscs(hosts) == []
    assert not (home / "testhosts").exists()


@pytest.mark.parametrize(
    ("args", "flag"),
    [(("up", "2", "--rate", "fast"), "--rate"), (("up", "2", "--rate", "100mb"), "--rate"),
     (("rate", "10furlongs"), "RATE"), (("rate", "1e9"), "RATE")],
)  # fmt: skip
def test_a_bad_rate_exits_2_naming_the_flag_and_makes_nothing(
    tmp_path: Path, args: tuple[str, ...], flag: str
) -> None:
    home = tmp_path / "home"
    done = cli(home, "testhosts", *args)
    assert done.returncode == 2, done.stderr
    assert f"{flag}:" in done.stderr and "is not a rate" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""
    assert not (home / "testhosts").exists()


def test_rate_with_no_hosts_up_says_so(tmp_path: Path) -> None:
    require_test_hosts()
    done = cli(tmp_path / "home", "testhosts", "rate", "100mbit")
    assert done.returncode == 5 and "are not up" in done.stderr, done.stderr
    assert "ringleader testhosts up 3 --rate 100mbit" in done.stderr


def test_a_tc_failure_part_way_clears_the_hosts_already_limited() -> None:
    """Host 1's tc fails: host 0, limited a moment before, is cleared again (no
    network is left half-limited), and the error carries tc's words."""
    hosts = [rate.Link("rlt1-0h0", "rlt1-0v0"), rate.Link("rlt1-0h1", "rlt1-0v1")]
    limited: set[str] = set()
    calls: list[tuple[str, ...]] = []

    def runner(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        device = argv[argv.index("dev") + 1] + (argv[2] if argv[1] == "-n" else "")
        verb = argv[argv.index("qdisc") + 1]
        out, code, err = "", 0, ""
        if verb == "replace" and "rlt1-0h1" in device:
            code, err = 2, "RTNETLINK answers: Operation not permitted"
        elif verb == "replace":
            limited.add(device)
        elif verb == "del":
            limited.discard(device)
        elif verb == "show" and device in limited:
            out = "qdisc tbf 8001: root refcnt 2 rate 100Mbit burst 256Kb lat 167ms\n"
        if code and check:
            raise rate.TestHostError(f"{' '.join(argv)} exited {code}: {err}")
        return subprocess.CompletedProcess(argv, code, out, err)

    with pytest.raises(rate.TestHostError, match="Operation not permitted"):
        rate.set_rate(hosts, 10**8, runner=runner)
    assert limited == set()
    assert ("tc", "qdisc", "del", "dev", "rlt1-0v0", "root") in calls
    assert rate.rates(hosts, runner=runner) == [(None, None), (None, None)]
