"""``TestHostNetwork``: N test hosts on one bridge, built and torn down as a unit.

Invariants:

* Every interface name is at most 15 characters (kernel IFNAMSIZ).
* The subnet octet is chosen, under a file lock, among octets no address or route of
  the root namespace uses, so concurrent networks (xdist, a user's) never share one.
* Building fails whole: whatever exists when a step fails is torn down before the
  error propagates (hosts 1-2 of a failed host 3 included).
* Teardown kills only pids we started, then whatever still runs inside *our*
  namespaces, then deletes namespaces, veths and the bridge by name, so it works on a
  half-built network and is idempotent. The files go only when nothing else is left
  (what is left is said; ``ringleader testhosts down`` retries from them).
* Root writes only into directories it made exclusively, below directories no other
  user can change (``paths``): a predictable ``/tmp/rlt...-net`` made by someone
  else is refused, never written into.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import itertools
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ringleader.cluster.testhosts import sshd
from ringleader.cluster.testhosts.links import (
    LOCK_FILE,
    SUBNET_PREFIX,
    TAG_RE,
    ProcessId,
    Runner,
    TestHostError,
    cleanup_stale,
    delete_link,
    delete_netns,
    free_octet,
    run,
)
from ringleader.cluster.testhosts.paths import changeable_by_others, is_ours, make_private_dir

INTERFACE = "eth0"
IFNAMSIZ = 15
_SEQ = itertools.count()


def new_test_tag() -> str:
    """A fresh tag for a network of this process: ``rlt<pid>-<seq>``, both hex."""
    return f"rlt{os.getpid():x}-{next(_SEQ) % 256:x}"


@dataclass
class TestHost:
    """One simulated machine: a netns with an sshd listening on ``address:22``."""

    __test__ = False  # not a pytest test class despite the name
    index: int
    netns: str
    veth: str
    address: str
    dir: Path
    hidden_dirs: tuple[str, ...] = ()
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    sshd: ProcessId | None = None  # recorded at spawn: what a later ``down`` may signal

    @property
    def name(self) -> str:
        return self.netns

    @property
    def sshd_pid(self) -> int | None:
        """Pid of the running sshd listener, None when it is not running."""
        return self.process.pid if self.process and self.process.poll() is None else None

    @property
    def sshd_log(self) -> Path:
        return self.dir / "sshd.log"


class TestHostNetwork:
    """N test hosts on one bridge; use as a context manager (or ``start()``/``close()``).

    ``tag`` and ``dir`` default to a test run's (``rlt<pid>-<seq>``, a temp dir that
    the network makes and removes); a ``dir`` given is the caller's: made by it
    (root's, 0700) and left to it. ``progress`` hears one line per change made.
    """

    __test__ = False  # not a pytest test class despite the name
    interface = INTERFACE

    def __init__(
        self,
        n: int = 3,
        *,
        hidden_dirs: Mapping[int, Sequence[str | os.PathLike[str]]] | None = None,
        password_auth: bool = False,
        sshd_options: Mapping[str, str] | None = None,
        ready_timeout: float = 15.0,
        own_containers: bool = False,
        tag: str | None = None,
        dir: Path | None = None,
        runner: Runner = run,
        progress: Callable[[str], None] | None = None,
    ) -> None:
        self.tag = tag or new_test_tag()
        if not TAG_RE.match(self.tag):
            raise ValueError(f"tag {self.tag!r}: a test network's rlt<pid>-<seq> or rlu<k>")
        if n < 1 or len(f"{self.tag}v{n - 1}") > IFNAMSIZ or 10 + n > 253:
            raise ValueError(f"n={n}: 1 or more, and interface names stay <= {IFNAMSIZ} chars")
        hidden = {i: tuple(map(os.fspath, ps)) for i, ps in (hidden_dirs or {}).items()}
        if not set(hidden) <= set(range(n)):
            raise ValueError(f"hidden_dirs names hosts outside 0..{n - 1}: {sorted(hidden)}")
        self.bridge = f"{self.tag}br"
        self.password_auth = password_auth
        self.own_containers = own_containers
        self.sshd_options = dict(sshd_options or {})
        self.ready_timeout = ready_timeout
        self._own_dir = dir is None
        self._made_dir = False  # True once start() has made it (then close() removes it)
        self.dir = dir or Path(tempfile.gettempdir()).resolve() / f"{self.tag}-net"
        sshd.check_quotable(self.dir)
        self.ssh_config = self.dir / "ssh_config"
        self.known_hosts = self.dir / "known_hosts"
        self.identity_file = self.dir / "id_ed25519"
        self.authorized_keys = self.dir / "authorized_keys"
        self.subnet_octet: int | None = None
        self.hosts = [
            TestHost(i, f"{self.tag}h{i}", f"{self.tag}v{i}", "", self.dir / f"h{i}",
                     hidden.get(i, ()))
            for i in range(n)
        ]  # fmt: skip
        self._run = runner
        self._progress = progress or (lambda line: None)
        self._closed = False

    def _addr(self, last: int) -> str:
        return f"{SUBNET_PREFIX}.{self.subnet_octet}.{last}"

    @property
    def bridge_address(self) -> str:
        return self._addr(1)

    @property
    def unreachable_address(self) -> str:
        """An address inside the subnet where no host answers (connects time out/fail)."""
        return self._addr(254)

    def host(self, host: int | str | TestHost) -> TestHost:
        """Resolve an index, netns name or address to its TestHost."""
        if isinstance(host, TestHost):
            return host
        if isinstance(host, int):
            return self.hosts[host]
        for h in self.hosts:
            if host in (h.netns, h.address):
                return h
        raise KeyError(f"no test host named {host!r} in {self.tag}")

    def __enter__(self) -> TestHostNetwork:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def start(self) -> TestHostNetwork:
        """Build bridge, namespaces and sshds; on any failure tear down what exists."""
        atexit.register(self.close)
        try:
            self._build()
        except BaseException as exc:
            try:
                self.close()
            except TestHostError as undo:  # say both: what failed, what is left of it
                if isinstance(exc, Exception):
                    raise TestHostError(f"{exc}; undoing it: {undo}") from exc
            raise
        return self

    def detach(self) -> None:
        """Let the network outlive this process (``ringleader testhosts up``): no
        teardown at exit; a later ``down`` finds it by its tag and recorded pids."""
        atexit.unregister(self.close)

    def _make_dir(self) -> None:
        """The network's directory: made exclusively (a test run's, in a temp dir only
        root may change but for its sticky bit), or the caller's, checked to be root's."""
        if not self._own_dir:
            if not is_ours(self.dir):
                raise TestHostError(f"{self.dir} is not a directory of root's, mode 0700")
            return
        problem = changeable_by_others(self.dir.parent)
        if problem is not None:
            where, why = problem
            raise TestHostError(
                f"{self.dir}: {where} {why}, so another user could change what root writes"
                " there\n  fix: point TMPDIR at a directory only root can change"
            )
        try:
            make_private_dir(self.dir, leftover_ok=True)
        except FileExistsError as exc:
            raise TestHostError(f"{self.dir} {exc.strerror}\n  fix: remove it") from None
        self._made_dir = True

    def _build(self) -> None:
        run_ = self._run
        self._make_dir()  # before anything else: a refusal leaves nothing behind
        LOCK_FILE.touch(exist_ok=True)
        with LOCK_FILE.open() as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            cleanup_stale(run_)
            self.subnet_octet = free_octet(run_)
            run_("ip", "link", "add", self.bridge, "type", "bridge")
            run_("ip", "addr", "add", f"{self.bridge_address}/24", "dev", self.bridge)
        run_("ip", "link", "set", self.bridge, "up")
        self._progress(f"bridge {self.bridge} {self.bridge_address}/24 (root namespace)")
        keygen = ("ssh-keygen", "-q", "-t", "ed25519", "-N", "")
        run_(*keygen, "-C", f"{self.tag}-client", "-f", str(self.identity_file))
        shutil.copy(self.identity_file.with_suffix(".pub"), self.authorized_keys)
        self.ssh_config.write_text(sshd.ssh_config(self.identity_file, self.known_hosts))
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privsep chroot
        self._write_names()
        known = []
        for h in self.hosts:
            known.append(self._make_host(h, keygen))
        self.known_hosts.write_text("".join(known))
        for h in self.hosts:
            assert h.process is not None
            sshd.wait_ready(h.process, h.address, h.sshd_log, h.netns, self.ready_timeout)

    @property
    def etc_files(self) -> dict[str, Path]:
        """What each host sees at these paths instead of the machine's: the network's
        names, no DNS, and root's shell setup (``sshd.ROOT_BASHRC`` says why) where the
        machine has one to stand in for (a bind needs a file to bind over)."""
        files = {"/etc/hosts": self.dir / "hosts", "/etc/resolv.conf": self.dir / "resolv.conf"}
        root_bashrc = Path(pwd.getpwuid(0).pw_dir) / ".bashrc"
        if root_bashrc.is_file():
            files[str(root_bashrc)] = self.dir / "bashrc"
        return files

    def _write_names(self) -> None:
        """Every host's /etc/hosts and /etc/resolv.conf (``sshd.RESOLV_CONF`` says why)
        and root's ~/.bashrc (``sshd.ROOT_BASHRC``):
        each host by its address (its hostname) and its netns name, and the bridge,
        where the machine itself is reached, by the bridge's name."""
        names = {self.bridge_address: self.bridge}
        for h in self.hosts:
            address = self._addr(10 + h.index)
            names[address] = f"{address} {h.netns}"
        files = self.etc_files
        files["/etc/hosts"].write_text(sshd.hosts_file(names))
        files["/etc/resolv.conf"].write_text(sshd.RESOLV_CONF)
        (self.dir / "bashrc").write_text(sshd.root_bashrc(os.environ.get("PATH", "")))

    def _make_host(self, h: TestHost, keygen: tuple[str, ...]) -> str:
        """Namespace, veth, address, route, host key, sshd; its known_hosts line."""
        run_ = self._run
        h.address = self._addr(10 + h.index)
        make_private_dir(h.dir)
        run_("ip", "netns", "add", h.netns)
        run_("ip", "link", "add", h.veth, "type", "veth", "peer", "name", INTERFACE,
             "netns", h.netns)  # fmt: skip
        run_("ip", "link", "set", h.veth, "master", self.bridge, "up")
        ns = ("ip", "-n", h.netns)
        run_(*ns, "addr", "add", f"{h.address}/24", "dev", INTERFACE)
        run_(*ns, "link", "set", INTERFACE, "up")
        run_(*ns, "link", "set", "lo", "up")
        run_(*ns, "route", "add", "default", "via", self.bridge_address)
        run_(*keygen, "-C", h.netns, "-f", str(h.dir / "ssh_host_ed25519_key"))
        pub = (h.dir / "ssh_host_ed25519_key.pub").read_text().split()
        config = sshd.sshd_config(
            h.dir, self.authorized_keys, self.password_auth, self.sshd_options
        )
        (h.dir / "sshd_config").write_text(config)
        self._spawn_sshd(h)
        return f"{h.address} {pub[0]} {pub[1]}\n"

    def _spawn_sshd(self, h: TestHost) -> None:
        argv = sshd.sshd_argv(
            h.netns, h.address, h.dir, hidden_dirs=h.hidden_dirs,
            own_containers=self.own_containers, protected=[self.dir], etc=self.etc_files,
        )  # fmt: skip
        with h.sshd_log.open("ab") as log:  # exec chain keeps the pid: Popen.pid is sshd's
            h.process = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        h.sshd = ProcessId.of(h.process.pid)
        self._progress(
            f"host {h.index}: netns {h.netns}, veth {h.veth}, {INTERFACE} {h.address}/24,"
            f" sshd pid {h.process.pid}"
        )

    def take_down(self, host: int | str | TestHost) -> None:
        """Unplug the host: its bridge-side veth goes down (the host itself keeps running)."""
        self._run("ip", "link", "set", self.host(host).veth, "down")

    def bring_up(self, host: int | str | TestHost) -> None:
        """Plug the host back in after take_down."""
        self._run("ip", "link", "set", self.host(host).veth, "up")

    def kill_sshd(self, host: int | str | TestHost, sig: int = signal.SIGKILL) -> None:
        """Kill the host's sshd listener (sessions already open keep running)."""
        h = self.host(host)
        if h.process is not None and h.process.poll() is None:
            h.process.send_signal(sig)
            h.process.wait(timeout=10)

    def start_sshd(self, host: int | str | TestHost) -> int:
        """(Re)start the host's sshd, e.g. after kill_sshd; returns its pid once ready."""
        h = self.host(host)
        self.kill_sshd(h, signal.SIGTERM)
        self._spawn_sshd(h)
        assert h.process is not None
        sshd.wait_ready(h.process, h.address, h.sshd_log, h.netns, self.ready_timeout)
        return h.process.pid

    def ssh_argv(
        self, host: int | str | TestHost, *cmd: str, options: Mapping[str, str] | None = None
    ) -> list[str]:
        """``ssh -F ssh_config [-o K=V ...] ADDRESS -- CMD...`` (ssh joins CMD with spaces
        and the remote shell parses it, exactly like plain ssh: quote with shlex.join)."""
        opts = [f"-o{k}={v}" for k, v in (options or {}).items()]
        return ["ssh", "-F", str(self.ssh_config), *opts, self.address(host), "--", *cmd]

    def address(self, host: int | str | TestHost) -> str:
        """The IP of a host; any other string is taken as a literal address (unreachable)."""
        if isinstance(host, str) and all(host != h.netns for h in self.hosts):
            return host
        return self.host(host).address

    def ssh(
        self,
        host: int | str | TestHost,
        *cmd: str,
        timeout: float = 30,
        options: Mapping[str, str] | None = None,
        input: str | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run CMD on the host over real ssh; returns the result, never raises on rc!=0."""
        argv = self.ssh_argv(host, *cmd, options=options)
        stdin = subprocess.DEVNULL if input is None else None  # never wait on our stdin
        return subprocess.run(
            argv, stdin=stdin, input=input, capture_output=True, text=True, timeout=timeout,
            check=False,
        )  # fmt: skip

    def netns_argv(self, host: int | str | TestHost, *cmd: str) -> list[str]:
        """``ip netns exec NS CMD...``: run a local command *inside* the host's network."""
        return ["ip", "netns", "exec", self.host(host).netns, *cmd]

    def close(self) -> None:
        """Tear everything down (idempotent, works on a half-built network)."""
        if self._closed:
            return
        self._closed = True
        atexit.unregister(self.close)
        errors: list[str] = []
        for h in self.hosts:
            with contextlib.suppress(Exception):  # it is killed below either way
                self.kill_sshd(h, signal.SIGTERM)
            if h.process is not None and h.process.poll() is None:
                h.process.kill()
                h.process.wait()
        for h in self.hosts:
            errors += delete_netns(h.netns, h.veth, self._run)
        errors += delete_link(self.bridge, self._run)
        if errors:  # the files stay: a later ``down`` (or the stale sweep) retries
            raise TestHostError("test-host teardown incomplete: " + "; ".join(errors))
        if self._made_dir:
            shutil.rmtree(self.dir, ignore_errors=True)
