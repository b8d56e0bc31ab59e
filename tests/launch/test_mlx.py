"""Seed 003 with an MLX program: ranks ``ringleader launch`` starts form one MLX world.

Real MLX (``mlx[cpu]`` from PyPI, its ring backend over TCP), real ranks, and
for the multi-host case real sshd in network-namespace hosts.  Also the
hung-teardown rule (``launch/teardown.py``): a rank whose main path raised
but whose process stays alive fails the gang after the grace period, with
its traceback as the root cause, whatever the program (MLX or not).
"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ringleader.launch import mlx, netif
from tests.conftest import PYTHON, launch, require
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `test_hosts` fixture)
    TestHostNetwork,
    test_hosts_fixture,
)

# Seed 003's program: MLX's distributed hello world, the "[Rank r/n]" lines of its guide.
TRAIN = """\
import mlx.core as mx
world = mx.distributed.init()
total = mx.distributed.all_sum(mx.array([float(world.rank() + 1)]))
print(f"[Rank {world.rank()}/{world.size()}] all_sum {total.item():g}", flush=True)
"""

# Rank 1 raises after init() while a thread of it still waits on rank 0: its
# teardown joins that thread, and ranks 0 and 2 wait in all_sum for rank 1.
RAISES = """\
import threading
import mlx.core as mx
world = mx.distributed.init()
if world.rank() == 1:
    threading.Thread(target=lambda: mx.eval(mx.distributed.recv_like(mx.ones(4), 0))).start()
    raise RuntimeError("rank 1 cannot read its shard")
mx.eval(mx.distributed.all_sum(mx.ones(4)))
print("unreachable: all_sum returned", flush=True)
"""


def require_mlx() -> None:
    require(importlib.util.find_spec("mlx") is not None, "mlx (pip install 'mlx[cpu]')")


def write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return str(path)


def sums(stdout: str, world: int) -> set[str]:
    return set(re.findall(rf"\[Rank (\d+)/{world}\] all_sum {world * (world + 1) // 2}\b", stdout))


# ----- what every rank gets --------------------------------------------------------


def test_free_ports_are_distinct_and_the_ring_env_of_a_world_of_one_has_no_hostfile() -> None:
    ports = netif.free_ports(16)
    assert len(set(ports)) == 16 and all(0 < p < 65536 for p in ports)
    assert mlx.ring_env(0, 1, "/r/mlx-hostfile.json") == {"MLX_RANK": "0"}
    assert mlx.ring_env(2, 3, "/r/h.json") == {"MLX_RANK": "2", "MLX_HOSTFILE": "/r/h.json"}
    assert json.loads(mlx.hostfile_text(["10.0.0.1:5", "10.0.0.2:6"])) == [
        ["10.0.0.1:5"],
        ["10.0.0.2:6"],
    ]


def test_every_rank_reads_mlx_rank_and_a_hostfile_of_free_local_ports(tmp_path: Path) -> None:
    show = write(
        tmp_path,
        "show.py",
        """\
        import json, os
        hosts = json.load(open(os.environ["MLX_HOSTFILE"]))
        print("mlx", os.environ["MLX_RANK"], os.environ["RANK"], json.dumps(hosts))
        """,
    )
    done = launch("-n", "3", "--", PYTHON, show)
    assert done.returncode == 0, done.stderr
    lines = re.findall(r"\] mlx (\d) (\d) (.*)$", done.stdout, re.M)
    assert sorted((m, r) for m, r, _ in lines) == [("0", "0"), ("1", "1"), ("2", "2")]
    hostfiles = {h for _, _, h in lines}
    assert len(hostfiles) == 1, hostfiles  # every rank reads the same list
    entries = json.loads(hostfiles.pop())
    assert [len(e) for e in entries] == [1, 1, 1]
    addresses = [e[0].rsplit(":", 1) for e in entries]
    assert {ip for ip, _ in addresses} == {"127.0.0.1"}
    assert len({port for _, port in addresses}) == 3


# ----- seed 003: one world --------------------------------------------------------


def test_seed_003_all_sum_on_three_local_ranks_is_one_world(tmp_path: Path) -> None:
    require_mlx()
    write(tmp_path, "train.py", TRAIN)
    done = launch("-n", "3", "--", PYTHON, "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(done.stdout, 3) == {"0", "1", "2"}, done.stdout
    assert "/1]" not in done.stdout  # no rank alone in a world of one


def test_a_hosts_json_listing_this_machine_three_times(tmp_path: Path) -> None:
    require_mlx()
    write(tmp_path, "train.py", TRAIN)
    hosts = tmp_path / "hosts.json"
    hosts.write_text(json.dumps([{"ssh": "localhost", "ips": ["127.0.0.1"]}] * 3))
    done = launch("--hostfile", str(hosts), "--", PYTHON, "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sums(done.stdout, 3) == {"0", "1", "2"}, done.stdout


def test_a_world_of_one_is_not_left_waiting_for_peers(tmp_path: Path) -> None:
    require_mlx()
    write(tmp_path, "train.py", TRAIN)
    done = launch("-n", "1", "--", PYTHON, "train.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "[Rank 0/1] all_sum 1" in done.stdout


def test_a_restart_forms_a_new_world_on_fresh_ports(tmp_path: Path) -> None:
    require_mlx()
    write(
        tmp_path,
        "flaky.py",
        TRAIN
        + textwrap.dedent(
            """\
            import json, os, sys
            print("ports", json.dumps(json.load(open(os.environ["MLX_HOSTFILE"]))), flush=True)
            # Every rank has said its lines before rank 2 fails (fail-fast stops the
            # others at once: a rank still printing would lose its line).
            mx.eval(mx.distributed.all_sum(mx.array([1.0])))
            if world.rank() == 2 and os.environ["TORCHELASTIC_RESTART_COUNT"] == "0":
                sys.exit(3)
            """
        ),
    )
    done = launch("-n", "3", "--max-restarts", "1", "--", PYTHON, "flaky.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    attempts = set(re.findall(r"\] ports (.*)$", done.stdout, re.M))
    assert len(attempts) == 2, done.stdout  # each attempt its own ports
    assert len(re.findall(r"\[Rank \d/3\] all_sum 6", done.stdout)) == 6, done.stdout


@pytest.mark.multihost
def test_seed_003_hosts_json_across_three_hosts(
    test_hosts: TestHostNetwork, tmp_path: Path
) -> None:
    require_mlx()
    net = test_hosts
    write(tmp_path, "train.py", TRAIN)
    hosts = tmp_path / "hosts.json"  # the guide's hosts.json
    hosts.write_text(json.dumps([{"ssh": h.address, "ips": [h.address]} for h in net.hosts]))
    done = launch("--hostfile", str(hosts), "--ssh-config", str(net.ssh_config),
                  "--", "python", "train.py", cwd=tmp_path, timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    for h in net.hosts:
        assert f"[{h.index}/3 {h.address}] [Rank {h.index}/3] all_sum 6" in done.stdout, done.stdout

    # A rank that raises there and hangs in teardown fails the gang, with its traceback.
    write(tmp_path, "train.py", RAISES)
    failed = launch("--hostfile", str(hosts), "--ssh-config", str(net.ssh_config), "--grace", "1",
                    "--", "python", "train.py", cwd=tmp_path, timeout=180)  # fmt: skip
    assert failed.returncode == 1, failed.stderr[-3000:]
    cause = root_cause(failed.stderr)
    assert f"host      : {net.hosts[1].address}" in cause, cause
    assert "RuntimeError: rank 1 cannot read its shard" in cause
    assert "hung in teardown 1s after its traceback" in cause


# ----- the hung-teardown rule ------------------------------------------------------


def root_cause(stderr: str) -> str:
    return stderr[stderr.index("Root Cause") :]


def test_an_mlx_rank_that_raises_fails_the_gang_with_its_traceback(tmp_path: Path) -> None:
    require_mlx()
    write(tmp_path, "train.py", RAISES)
    done = launch("-n", "3", "--grace", "1", "--", PYTHON, "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    cause = root_cause(done.stderr)
    assert re.search(r"rank\s+: 1\b", cause), cause
    assert "RuntimeError: rank 1 cannot read its shard" in cause
    assert "hung in teardown 1s after its traceback" in cause
    assert "unreachable" not in done.stdout


def test_the_rank_that_raised_is_the_root_cause_not_the_peers_that_lost_it(
    tmp_path: Path,
) -> None:
    """Rank 1 raises and exits; ranks 0 and 2 then fail with "connection to a peer was
    lost" within a millisecond, and their exits may be reported first."""
    require_mlx()
    write(
        tmp_path,
        "train.py",
        """\
        import mlx.core as mx
        world = mx.distributed.init()
        if world.rank() == 1:
            raise RuntimeError("rank 1 cannot read its shard")
        mx.eval(mx.distributed.all_sum(mx.ones(4)))
        """,
    )
    for _ in range(3):  # the race goes either way from run to run
        done = launch("-n", "3", "--", PYTHON, "train.py", cwd=tmp_path)
        assert done.returncode == 1, done.stderr[-3000:]
        cause = root_cause(done.stderr)
        assert re.search(r"rank\s+: 1\b", cause), cause
        assert "RuntimeError: rank 1 cannot read its shard" in cause


HANGS_AFTER_RAISE = """\
import os, sys, threading, time
if os.environ["RANK"] != "1":
    time.sleep(600)  # a peer blocked in a collective that rank 1 never joins
{setup}
threading.Thread(target=threading.Event().wait).start()  # teardown joins it: forever
raise ValueError("bad batch on rank 1")
"""


@pytest.mark.parametrize(
    "setup",
    [
        "",
        # A program with its own excepthook (rich.traceback.install() does this).
        "sys.excepthook = lambda t, e, tb: print('custom hook:', e, file=sys.stderr)",
    ],
    ids=["default-hook", "own-excepthook"],
)
def test_any_python_rank_hung_in_teardown_fails_the_gang(tmp_path: Path, setup: str) -> None:
    write(tmp_path, "train.py", HANGS_AFTER_RAISE.format(setup=setup))
    done = launch("-n", "3", "--grace", "1", "--", PYTHON, "train.py", cwd=tmp_path)
    assert done.returncode == 1, done.stderr[-3000:]
    cause = root_cause(done.stderr)
    assert re.search(r"rank\s+: 1\b", cause), cause
    assert "ValueError: bad batch on rank 1" in cause
    assert "hung in teardown" in cause


def test_a_child_python_that_raises_is_its_parents_business(tmp_path: Path) -> None:
    """Only the rank's first interpreter is armed: a helper that fails (and is slow to
    end) while the rank carries on is not the rank's failure."""
    write(
        tmp_path,
        "parent.py",
        """\
        import subprocess, sys
        child = "import threading, time; threading.Thread(target=time.sleep, args=(3,)).start(); raise KeyError('helper')"
        code = subprocess.run([sys.executable, "-c", child], stderr=subprocess.DEVNULL).returncode
        print("helper exited", code, flush=True)
        """,
    )
    done = launch("-n", "2", "--grace", "0.5", "--", PYTHON, "parent.py", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("helper exited 1") == 2


def test_the_users_own_sitecustomize_runs_and_user_code_sees_no_trace(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\n")
    show = write(
        tmp_path,
        "show.py",
        """\
        import os, sys
        hook = [p for p in sys.path if "rankhook" in p]
        print("site", os.environ.get("USER_SITE_RAN"), os.environ.get("PYTHONPATH"), hook,
              "RINGLEADER_MAIN_ENDED_FILE" in os.environ, flush=True)
        """,
    )
    done = launch("-n", "1", "--", PYTHON, show, env={"PYTHONPATH": str(site)})
    assert done.returncode == 0, done.stderr
    assert f"site yes {site} [] False" in done.stdout, done.stdout


def test_an_uncaught_exception_is_recorded_in_torchs_error_file_format(tmp_path: Path) -> None:
    """The rank's armed interpreter records what escaped, without ringleader.runtime."""
    from ringleader.runtime.errorfile import read_error_file

    error_file = tmp_path / "rank-0.error.json"
    marker = tmp_path / "rank-0.ended"
    hook_dir = Path(mlx.__file__).parent / "rankhook"
    env = {"PYTHONPATH": str(hook_dir), "TORCHELASTIC_ERROR_FILE": str(error_file),
           "RINGLEADER_MAIN_ENDED_FILE": str(marker), "PATH": "/usr/bin:/bin"}  # fmt: skip
    proc = subprocess.run([sys.executable, "-c", "raise OSError('disk gone')"], env=env,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert proc.returncode == 1 and "OSError: disk gone" in proc.stderr
    recorded = read_error_file(error_file)
    assert recorded is not None and recorded["message"] == "OSError: disk gone"
    assert 'File "<string>", line 1' in recorded["traceback"]
    pid, when = marker.read_text().split()
    assert int(pid) > 0 and float(when) > 0
