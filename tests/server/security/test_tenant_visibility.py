"""Tenants cannot see each other (issue 22, finding 8): a pod of eve's looks for frank's
running workload where pods used to find it, the cgroup tree (``rl-<workload id>``
and pod names), ``/tmp`` and ``$TMPDIR`` (the files frank's rank wrote there),
``/proc`` and ``ps`` (his command line, environment and cgroup), and finds nothing,
while it still sees its own processes and files.  Frank's /tmp is his pod's own and
ends with it.

A real ``ringleader server --run-as user`` (``site``) with real OS accounts.  The
unit tests drive ``launch/podns.py`` and the cgroup modes directly.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from ringleader.launch import podns
from ringleader.server.backends.local import LocalBackend
from ringleader.server.backends.local.cgroups import Hierarchy
from tests.conftest import wait_until
from tests.fixtures.tenants import (
    Site,
    need_root_and_useradd,
    tenant_site,  # noqa: F401 (the fixture: site)
)
from tests.server.probes import probe_result

FRANK = r"""
import json, os, sys
secret = sys.argv[1]
for folder in ("/tmp", os.environ["TMPDIR"]):
    with open(os.path.join(folder, f"frank-{secret}-{len(folder)}"), "w") as f:
        f.write(secret)
print("FRANK " + json.dumps({"tmpdir": os.environ["TMPDIR"], "pid": os.getpid(),
      "tmp": sorted(os.listdir("/tmp"))}), flush=True)
"""

EVE = r"""
import json, os, subprocess, sys
paths = json.load(open(sys.argv[1]))  # not on its own command line: /proc is searched
secret, frank_id = paths["secret"], paths["frank_id"]
out = {}
def attempt(key, fn):
    try:
        out[key] = fn()
    except OSError as exc:
        out[key] = type(exc).__name__
# the cgroup tree: every name it lists, and frank's own by the path it would have
names = []
for top, dirs, files in os.walk("/sys/fs/cgroup"):
    names += dirs
out["cgroup_names_with_id"] = [n for n in names if frank_id in n]
for i, parent in enumerate(paths["parents"]):
    attempt(f"list_parent_{i}", lambda: sorted(os.listdir(parent)))
    attempt(f"list_run_{i}", lambda: os.listdir(os.path.join(parent, f"rl-{frank_id}")))
    attempt(f"read_procs_{i}", lambda: open(os.path.join(
        parent, f"rl-{frank_id}", paths["pod"], "cgroup.procs")).read())
# /tmp and $TMPDIR
found = []
for folder in {"/tmp", os.environ.get("TMPDIR", "/tmp"), "/var/tmp", "/dev/shm"}:
    for top, dirs, files in os.walk(folder):
        found += [os.path.join(top, f) for f in files if secret in f]
out["files_found"] = found
attempt("frank_file", lambda: open(paths["frank_file"]).read())
own = os.path.join(os.environ["TMPDIR"], "eve-was-here")
with open(own, "w") as f:
    f.write("eve")
out["own_tmp"] = open(own).read()
out["tmpdir"] = os.environ["TMPDIR"]
# /proc and ps
seen, leaked = [], []
for entry in os.listdir("/proc"):
    if entry.isdigit():
        seen.append(int(entry))
        for name in ("cmdline", "environ", "cgroup"):
            try:
                with open(f"/proc/{entry}/{name}", "rb") as f:
                    data = f.read()
                if secret.encode() in data or frank_id.encode() in data:
                    leaked.append((entry, name))
            except OSError:
                pass
out["leaked"] = leaked
out["sees_self"] = os.getpid() in seen
out["sees_frank_pid"] = paths["frank_pid"] in seen
attempt("frank_cmdline", lambda: open(f"/proc/{paths['frank_pid']}/cmdline").read())
attempt("frank_environ", lambda: open(f"/proc/{paths['frank_pid']}/environ").read())
ps = subprocess.run(["ps", "-eo", "pid,user,args"], capture_output=True, text=True).stdout
out["ps_mentions_frank"] = secret in ps or frank_id in ps
out["ps_shows_self"] = str(os.getpid()) in ps.split()
print("RESULT " + json.dumps(out), flush=True)
"""


def _mount_namespace(pid: int) -> int:
    return os.stat(f"/proc/{pid}/ns/mnt").st_ino


def _namespace_alive(inode: int) -> bool:
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and os.stat(entry / "ns" / "mnt").st_ino == inode:
                return True
        except OSError:
            continue
    return False


def test_a_tenant_finds_nothing_of_another_tenants_running_workload(site: Site) -> None:
    hierarchy = LocalBackend().cgroups
    assert hierarchy is not None, "this host makes cgroups: the test needs them"
    frank = site.user("frank")
    secret = f"fsec{uuid.uuid4().hex[:10]}"
    script = site.script("frank.py", FRANK)
    frank_id = site.submit(
        frank, "franks", "python", script, secret, interactive=True, env=(f"FRANKS={secret}",)
    )
    started = probe_result(site.wait_logs("franks", "FRANK ").replace("FRANK ", "RESULT ", 1))
    # Frank's /tmp is his pod's: his files are there, not in the host's /tmp.
    assert started["tmpdir"] == "/tmp", started
    assert any(secret in name for name in started["tmp"]), started
    assert not [n for n in os.listdir("/tmp") if secret in n]
    pod = "franks-master-0"
    # His rank has printed and ended; the pod's keepalive (its command line holds the
    # secret, its environment FRANKS) keeps the pod, and its view, up.
    frank_pid = min(hierarchy.pids(f"rl-{frank_id}/{pod}"))
    namespace = _mount_namespace(frank_pid)
    assert namespace != _mount_namespace(os.getpid())
    frank_file = f"/tmp/frank-{secret}-4"
    assert Path(f"/proc/{frank_pid}/root{frank_file}").read_text() == secret
    assert secret.encode() in Path(f"/proc/{frank_pid}/cmdline").read_bytes()
    # Eve's pod looks for him everywhere pods used to find each other.
    paths = {
        "secret": secret,
        "frank_id": frank_id,
        "pod": pod,
        "parents": [str(p) for p in hierarchy.parents.values()],
        "frank_file": frank_file,
        "frank_pid": frank_pid,
    }
    eve = site.user("eve")
    told = site.script("eve-knows.json", json.dumps(paths))  # what eve learned elsewhere
    site.submit(eve, "looks", "python", site.script("eve.py", EVE), told)
    result = probe_result(site.wait_logs("looks", "RESULT"))
    print("eve looked:", json.dumps(result, indent=1))
    assert result["cgroup_names_with_id"] == [], result
    for i in range(len(paths["parents"])):
        for key in (f"list_parent_{i}", f"list_run_{i}", f"read_procs_{i}"):
            assert result[key] == "PermissionError", (key, result)
    assert result["files_found"] == [], result
    assert result["frank_file"] == "FileNotFoundError", result
    assert result["leaked"] == [], result
    assert result["sees_frank_pid"] is False, result
    assert result["frank_cmdline"] == result["frank_environ"] == "FileNotFoundError", result
    assert result["ps_mentions_frank"] is False, result
    # ... while her own pod works as before: her processes, her private /tmp.
    assert result["sees_self"] is True and result["ps_shows_self"] is True, result
    assert result["own_tmp"] == "eve" and result["tmpdir"] == "/tmp", result
    # Frank's own exec lands in his pod's view: his /tmp file, and no process of others.
    inside = site.as_user(frank, "exec", "franks", "--", "sh", "-c", f"cat {frank_file}; ls /proc")
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.startswith(secret), inside.stdout
    assert str(site.server.proc.pid if site.server.proc else 1) not in inside.stdout.split()
    # Frank's /tmp ends with his pod: once deleted, no process holds its namespace.
    assert site.server.cli("delete", "franks").returncode == 0
    wait_until(lambda: not _namespace_alive(namespace), 60, "frank's pod view to end")


# ----- unit: the private view and the cgroup modes ----------------------------------------
@pytest.fixture
def kept() -> Iterator[Path]:
    """An agent's run dir in the host's /tmp (root's, 0711), which a view keeps."""
    need_root_and_useradd()
    path = Path(tempfile.mkdtemp(prefix="rl-kept-", dir="/tmp"))
    path.chmod(0o711)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def _nobody() -> tuple[int, int]:
    entry = pwd.getpwnam("nobody")
    return entry.pw_uid, entry.pw_gid


def _run(argv: list[str], env: dict[str, str], **kw: object) -> subprocess.CompletedProcess[str]:
    with podns.popen_args(argv, "/", env, _nobody(), **kw) as args:  # type: ignore[arg-type]
        proc = subprocess.Popen(**args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = proc.communicate(timeout=60)
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_the_private_view_hides_tmp_and_other_accounts_processes_and_keeps_the_run_dir(
    kept: Path,
) -> None:
    (kept / "hostfile").write_text("localhost slots=1\n")
    (kept / "hostfile").chmod(0o644)
    script = (
        "import os, sys\n"
        "print(sorted(os.listdir('/tmp')))\n"
        "print(open(sys.argv[1]).read().strip())\n"
        "print(os.path.exists('/proc/1'), os.path.exists(f'/proc/{os.getpid()}'))\n"
        "print(os.getuid(), os.getgroups())\n"
        "open('/tmp/mine', 'w').write('x')\n"
    )
    env = {"PATH": os.environ["PATH"], "LD_PRELOAD": "/nonexistent/evil.so"}
    done = _run(["/usr/bin/python3", "-c", script, str(kept / "hostfile")], env, keep=[str(kept)])
    assert done.returncode == 0, done.stderr
    listing, hostfile, procs, ids = done.stdout.splitlines()[:4]
    assert listing == repr([kept.name])  # only the kept run dir, at its own path
    assert hostfile == "localhost slots=1"
    assert procs == "False True"  # root's init is hidden, its own process is not
    assert ids == f"{_nobody()[0]} []"
    assert not Path("/tmp/mine").exists()  # written in its own /tmp, gone with it
    # The wrapper (root) never ran with the rank's LD_PRELOAD: only the rank did.
    assert done.stderr.count("evil.so") == 1, done.stderr


def test_a_command_that_cannot_start_says_so_and_exits_127() -> None:
    need_root_and_useradd()
    done = _run(["/nonexistent/trainer"], {"PATH": "/usr/bin:/bin"})
    assert done.returncode == podns.CANNOT_START
    assert "cannot start '/nonexistent/trainer'" in done.stderr, done.stderr


def test_a_session_enters_the_view_of_a_running_pod() -> None:
    """``enter_fd``: what exec/bash sessions use to land in their pod's /tmp and /proc."""
    need_root_and_useradd()
    pod = None
    with podns.popen_args(
        ["sh", "-c", "echo up > /tmp/pod-file; echo ready; exec sleep 600"],
        "/",
        {"PATH": "/usr/bin:/bin"},
        _nobody(),
    ) as args:
        pod = subprocess.Popen(**args, stdout=subprocess.PIPE, text=True)
    try:
        assert pod.stdout is not None and pod.stdout.readline().strip() == "ready"
        ns = podns.view_of(pod.pid)
        try:
            done = _run(["cat", "/tmp/pod-file"], {"PATH": "/usr/bin:/bin"}, enter_fd=ns)
        finally:
            os.close(ns)
        assert (done.returncode, done.stdout.strip()) == (0, "up"), done.stderr
    finally:
        pod.kill()
        pod.wait()


def test_a_working_directory_that_climbs_out_of_tmp_is_never_bound_back() -> None:
    """``/tmp/../etc`` is /etc: not a directory of /tmp to bind into the fresh tmpfs
    (root would mount the tenant's directory over /etc in a view setuid works in)."""
    assert not podns._under("/tmp/../etc", "/tmp")
    assert not podns._under("/tmp/x/../../home/eve", "/tmp")
    assert podns._under("/tmp/a/../b", "/tmp")


def test_a_view_a_rank_made_for_itself_is_never_entered() -> None:
    """A tenant's process in a user and mount namespace of its own (``unshare -Urm``:
    it could mount its files over /etc there) is refused as a session's view; root
    entering it would run setuid programs against them."""
    need_root_and_useradd()
    nobody = pwd.getpwnam("nobody")
    proc = subprocess.Popen(
        ["unshare", "-Urm", "sh", "-c", "echo ready; exec sleep 600"],
        user=nobody.pw_uid,
        group=nobody.pw_gid,
        cwd="/",
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        with pytest.raises(PermissionError, match="of its own making"):
            podns.view_of(proc.pid)
        os.close(podns.view_of(os.getpid()))  # a view root's namespace owns: entered
    finally:
        proc.kill()
        proc.wait()


def test_the_wrapper_gets_none_of_the_ranks_variables_and_others_start_as_before() -> None:
    with podns.popen_args(["true"], "/x", {"A": "b"}, (1000, 1000)) as args:
        if os.geteuid() == 0:  # root: the wrapper, with the agent's PATH alone
            assert args["args"][:3] == [sys.executable, "-I", "-S"]
            assert set(args["env"]) <= set(podns.WRAPPER_ENV)
        else:  # an unprivileged agent: Popen drops to the account itself, as before
            assert args == {"args": ["true"], "cwd": "/x", "env": {"A": "b"}, "user": 1000,
                            "group": 1000, "extra_groups": []}  # fmt: skip
    with podns.popen_args(["true"], "/x", {"A": "b"}, None) as args:
        assert args == {"args": ["true"], "cwd": "/x", "env": {"A": "b"}}


def test_cgroups_are_made_root_only_and_handed_to_the_pods_group_alone(tmp_path: Path) -> None:
    need_root_and_useradd()  # chown
    top = tmp_path / "unified"
    top.mkdir()
    (top / "cgroup.controllers").write_text("")
    from ringleader.server.backends.local.cgroup_versions import CgroupV2

    tree: Hierarchy = CgroupV2({"unified": top / "ringleader"})
    tree.create(".")
    tree.create("rl-w1/supervisor")
    tree.create("rl-w1/pod-0")
    for name in ("rl-w1/pod-0/cgroup.procs", "rl-w1/cgroup.procs"):
        (top / "ringleader" / name).write_text("")

    def mode(rel: str) -> int:
        return stat.S_IMODE((top / "ringleader" / rel).stat().st_mode)

    assert mode(".") == 0o711
    assert mode("rl-w1") == mode("rl-w1/supervisor") == mode("rl-w1/pod-0") == 0o700
    tree.hand_over("rl-w1/pod-0", 4242, 4343)
    assert (mode("rl-w1"), mode("rl-w1/pod-0"), mode("rl-w1/supervisor")) == (
        0o710,
        0o750,
        0o700,
    )
    for rel in ("rl-w1", "rl-w1/pod-0"):
        owner = (top / "ringleader" / rel).stat()
        assert (owner.st_uid, owner.st_gid) == (0, 4343)
    tree.create("rl-w1/pod-1")  # another pod later: the run's mode is kept
    assert mode("rl-w1") == 0o710


# Mounts that tests running meanwhile (pytest-xdist) make and remove in the host's
# table: podman's store, test hosts' network namespaces, container pods' staged
# mounts, a cgroup2 mount.  A private view's leak is none of these.
OTHERS_MOUNTS = ("/var/lib/containers/", "/run/containers/", "/run/netns", "/mounts-rank",
                 "/rl-cgroup2-")  # fmt: skip


def _host_mounts() -> Counter[str]:
    """The host's mount points (each as often as it is mounted), less ``OTHERS_MOUNTS``."""
    points = (line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines())
    return Counter(p for p in points if not any(other in p for other in OTHERS_MOUNTS))


@pytest.fixture(autouse=True)
def _no_leftover_mounts() -> object:
    before = _host_mounts()
    yield
    assert _host_mounts() == before


FALLBACK = r"""
import ctypes, json, sys
from ringleader.launch import podns

class Refusing:  # a host whose seccomp filter refuses unshare
    def unshare(self, flags):
        ctypes.set_errno(1)
        return -1

podns._libc = Refusing
sys.exit(podns._run(json.loads(sys.argv[1])))
"""


def test_where_the_host_refuses_a_namespace_tmpdir_is_private_and_the_pod_says_so(
    kept: Path,
) -> None:
    request = {
        "argv": ["sh", "-c", 'echo "$TMPDIR"; touch "$TMPDIR/mine"'],
        "cwd": "/",
        "env": {"PATH": "/usr/bin:/bin", "TMPDIR": "/tmp"},
        "uid": _nobody()[0],
        "gid": _nobody()[1],
        "keep": [str(kept)],
    }
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK, json.dumps(request)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    tmpdir = Path(done.stdout.strip())
    assert tmpdir.parent == kept and (tmpdir / "mine").stat().st_uid == _nobody()[0]
    assert stat.S_IMODE(tmpdir.stat().st_mode) == 0o700
    assert "no private mount namespace" in done.stderr and str(tmpdir) in done.stderr


def test_a_working_directory_in_tmp_is_bound_back_as_the_account_resolves_it() -> None:
    need_root_and_useradd()
    own, closed = (Path(tempfile.mkdtemp(prefix="rl-cwd-", dir="/tmp")) for _ in range(2))
    try:
        os.chown(own, *_nobody())
        (own / "data.txt").write_text("here\n")
        (own / "data.txt").chmod(0o644)
        env = {"PATH": "/usr/bin:/bin"}
        with podns.popen_args(["cat", "data.txt"], str(own), env, _nobody()) as args:
            done = subprocess.run(**args, capture_output=True, text=True, timeout=60)
        assert (done.returncode, done.stdout) == (0, "here\n"), done.stderr
        # root's own 0700 directory: not resolved with root's rights, so not there.
        with podns.popen_args(["true"], str(closed), env, _nobody()) as args:
            refused = subprocess.run(**args, capture_output=True, text=True, timeout=60)
        assert refused.returncode == podns.CANNOT_START, refused.stderr
        assert "cannot start 'true'" in refused.stderr
    finally:
        shutil.rmtree(own, ignore_errors=True)
        shutil.rmtree(closed, ignore_errors=True)
