"""MPI in images: the launcher container's ``mpirun`` starts its daemons in the worker
pods through ringleader, so an image needs no ssh client or sshd.

Why: Kubeflow's MPIJob gives mpirun an rsh agent that runs ``kubectl exec POD -- sh
-c "$*"``; here the agent is ``CLIENT`` (Python, as the image's ``python3`` runs
it), a file this host's agent writes into its run dir, which every container of the
run has mounted.  For each worker pod in the hostfile mpirun runs ``python3 CLIENT
POD orted ...``; the client connects to the bridge's unix socket beside it, sends
the pod and the command, and relays back what the command prints and its exit code.

The bridge is this host's agent (root): it takes a request only from the pod's
own account (``SO_PEERCRED``: another tenant's process on the host may find the
socket) and only for a worker pod of this run, then starts that pod as a container
of the image (``containers.popen_rank``: the pod's environment, mounts, cgroup,
GPUs and account, named for its first rank, removed with the job) running the
command under ``sh -c``, as mpirun quotes it for a remote shell.  When mpirun drops
the connection (its daemons are done, or it was stopped), the container is stopped.

A worker pod on another host (an SSH node): the launcher host's bridge relays the
request through the supervisor to that host's agent (``pod_start``, and ``pod_stop``
when the client goes), whose bridge starts the pod's container there and sends its
output and exit back the same way (``pod_out``, base64, and ``pod_exit``): only the
launcher host's bridge listens on a socket.

Frames back to the client: one byte (``o`` stdout, ``e`` stderr, ``x`` exit), a
4-byte big-endian length (for ``x``: the exit code), then the data.

Standard library only (the agent imports it for an MPI gang in an image).
"""

from __future__ import annotations

import base64
import contextlib
import itertools
import json
import os
import signal
import socket
import struct
import threading
from collections.abc import Callable
from subprocess import Popen, TimeoutExpired
from typing import Any

#: mpirun's rsh agent and the bridge's socket, in the launcher host's run dir.
CLIENT_FILE, SOCKET_FILE = "mpi-rsh.py", "mpi-rsh.sock"
MAX_REQUEST = 1 << 20  # an orted command line is a few KB
REQUEST_TIMEOUT_S = 30.0  # the client sends its request at once
CLIENT_SOURCE = '''\
"""ringleader's rsh agent for mpirun in an image: POD COMMAND... runs in that pod."""
import json, os, socket, struct, sys

here = os.path.dirname(os.path.abspath(__file__))
conn = socket.socket(socket.AF_UNIX)
conn.connect(os.path.join(here, "mpi-rsh.sock"))
conn.sendall(json.dumps({"pod": sys.argv[1], "argv": sys.argv[2:]}).encode() + b"\\n")
frames = conn.makefile("rb")
outs = {b"o": sys.stdout.buffer, b"e": sys.stderr.buffer}
while True:
    head = frames.read(5)
    if len(head) < 5:
        sys.exit(255)
    kind, size = head[:1], struct.unpack(">I", head[1:])[0]
    if kind == b"x":
        sys.exit(size)
    outs[kind].write(frames.read(size))
    outs[kind].flush()
'''

#: (pod name, the command's argv) -> the pod's container, started.
StartPod = Callable[[str, list[str]], Popen[bytes]]
#: A message to the supervisor (the agent's writer): (op, **fields).
Send = Callable[..., object]
#: The messages between bridges of one run, relayed by the supervisor.
RELAYED = frozenset({"pod_start", "pod_stop", "pod_out", "pod_exit"})


def rsh_agent(rundir: str) -> str:
    """mpirun's ``plm_rsh_agent`` value: the image's python3 running the client."""
    return f"python3 {os.path.join(rundir, CLIENT_FILE)}"


class Bridge:
    """The unix socket the launcher container's rsh agent reaches (see module doc), or
    on another host of the run (``listen`` false) the starter of its worker pods."""

    def __init__(
        self,
        rundir: str,
        pods: dict[str, Any],
        uid: int,
        start: StartPod,
        send: Send,
        *,
        node: int = 0,
        listen: bool = True,
    ) -> None:
        self.pods, self.uid, self.start, self.send, self.node = pods, uid, start, send, node
        self.path = os.path.join(rundir, SOCKET_FILE)
        self.procs: list[Popen[bytes]] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._remote: dict[int, _Remote] = {}  # requests another host serves, by id
        self._begun: dict[int, Popen[bytes]] = {}  # what this host serves for another's
        self.server: socket.socket | None = None
        if not listen:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)
        self.server = socket.socket(socket.AF_UNIX)
        self.server.bind(self.path)
        os.chmod(self.path, 0o666)  # the account connects; SO_PEERCRED says who it is
        self.server.listen(64)
        threading.Thread(target=self._accept, args=(self.server,), daemon=True).start()

    def close(self) -> None:
        """Stop taking requests and stop every pod started (the run is ending)."""
        if self.server is not None:
            with contextlib.suppress(OSError):
                self.server.close()
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
        with self._lock:
            procs, remote = list(self.procs), list(self._remote.values())
        for proc in procs:
            _stop(proc)
        for pending in remote:  # its host's agent is going too: the client hears so
            pending.finish(255)

    def relayed(self, msg: dict[str, Any]) -> None:
        """A message another host's bridge sent this one through the supervisor."""
        op, rid = msg.get("op"), msg.get("id")
        if not isinstance(rid, int):
            return
        if op == "pod_start":
            self._begin(rid, str(msg.get("pod")), msg.get("argv"))
        elif op == "pod_stop":
            with self._lock:
                proc = self._begun.get(rid)
            if proc is not None and proc.poll() is None:
                threading.Thread(target=_stop, args=(proc,), daemon=True).start()
        elif op == "pod_out":
            pending = self._remote.get(rid)
            kind = b"e" if msg.get("stream") == "e" else b"o"
            with contextlib.suppress(ValueError, TypeError):
                if pending is not None:
                    pending.emit(kind, base64.b64decode(str(msg.get("data", ""))))
        elif op == "pod_exit":
            pending = self._remote.get(rid)
            if pending is not None:
                pending.finish(int(msg.get("code") or 0))

    def _begin(self, rid: int, pod: str, argv: object) -> None:
        """Start a pod of this host for another host's mpirun; its output goes back."""

        def emit(kind: bytes, data: bytes) -> None:
            self.send("pod_out", id=rid, stream=kind.decode(), data=base64.b64encode(data).decode())

        if self.pods.get(pod, {}).get("node", self.node) != self.node or not _words(argv):
            emit(b"e", f"ringleader: no worker pod {pod!r} on this host\n".encode())
            self.send("pod_exit", id=rid, code=255)
            return
        assert isinstance(argv, list)
        try:
            proc = self.start(pod, ["/bin/sh", "-c", " ".join(argv)])
        except OSError as exc:
            emit(b"e", f"ringleader: cannot start pod {pod}: {exc}\n".encode())
            self.send("pod_exit", id=rid, code=255)
            return
        with self._lock:
            self.procs.append(proc)
            self._begun[rid] = proc

        def serve() -> None:
            code = _pump(proc, emit)
            with self._lock:
                self._begun.pop(rid, None)
            self.send("pod_exit", id=rid, code=code)

        threading.Thread(target=serve, daemon=True).start()

    def _accept(self, server: socket.socket) -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
            _pid, uid, _gid = struct.unpack("3i", creds)
            if uid not in (self.uid, 0):  # before reading a byte: no one else holds a thread
                _refuse(conn, f"uid {uid} may start no pod of this run")
                return
            conn.settimeout(REQUEST_TIMEOUT_S)
            try:
                request = _read_request(conn)
            except OSError:  # timed out, or gone
                return
            conn.settimeout(None)
            pod = str(request.get("pod")) if request else ""
            argv = request.get("argv") if request else None
            if pod not in self.pods or not _words(argv):
                _refuse(conn, f"no worker pod {pod!r} in this run")
                return
            if self.pods[pod].get("node", self.node) != self.node:
                self._forward(conn, pod, argv)
                return
            try:
                proc = self.start(pod, ["/bin/sh", "-c", " ".join(argv)])
            except OSError as exc:
                _refuse(conn, f"cannot start pod {pod}: {exc}")
                return
            with self._lock:
                self.procs.append(proc)
            self._relay(conn, proc)

    def _relay(self, conn: socket.socket, proc: Popen[bytes]) -> None:
        """The pod's output to the client until it exits; the client gone: stop it."""
        lock = threading.Lock()

        def emit(kind: bytes, data: bytes) -> None:
            with lock, contextlib.suppress(OSError):
                _send(conn, kind, data)

        watcher = threading.Thread(target=_stop_when_gone, args=(conn, proc), daemon=True)
        watcher.start()
        code = _pump(proc, emit)
        with lock, contextlib.suppress(OSError):
            _send_exit(conn, code)

    def _forward(self, conn: socket.socket, pod: str, argv: list[str]) -> None:
        """A worker pod on another host: its agent starts it (through the supervisor);
        this relays what comes back, and the client's going (mpirun ended it)."""
        rid = next(self._ids)
        pending = _Remote(conn)
        with self._lock:
            self._remote[rid] = pending
        try:
            self.send("pod_start", id=rid, pod=pod, argv=argv)
            with contextlib.suppress(OSError):
                while conn.recv(4096):
                    pass
            if not pending.done.is_set():
                self.send("pod_stop", id=rid)
                pending.done.wait(timeout=30)  # its exit, for the pod's container to go
        finally:
            with self._lock:
                self._remote.pop(rid, None)


class _Remote:
    """A client whose pod another host runs: frames to it, once ended no more."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn, self.lock, self.done = conn, threading.Lock(), threading.Event()

    def emit(self, kind: bytes, data: bytes) -> None:
        with self.lock, contextlib.suppress(OSError):
            if not self.done.is_set():
                _send(self.conn, kind, data)

    def finish(self, code: int) -> None:
        with self.lock, contextlib.suppress(OSError):
            if not self.done.is_set():
                self.done.set()
                _send_exit(self.conn, code)


def _pump(proc: Popen[bytes], emit: Callable[[bytes, bytes], None]) -> int:
    """``proc``'s stdout (``o``) and stderr (``e``) through ``emit`` until it exits; its
    exit code as a shell reports it (128 + the signal)."""

    def pump(stream: Any, kind: bytes) -> None:
        for chunk in iter(lambda: os.read(stream.fileno(), 65536), b""):
            emit(kind, chunk)

    pumps = [
        threading.Thread(target=pump, args=(proc.stdout, b"o"), daemon=True),
        threading.Thread(target=pump, args=(proc.stderr, b"e"), daemon=True),
    ]
    for thread in pumps:
        thread.start()
    code = proc.wait()
    for thread in pumps:
        thread.join(timeout=2)
    return code if code >= 0 else 128 - code


def _read_request(conn: socket.socket) -> dict[str, Any] | None:
    data = b""
    while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
        chunk = conn.recv(65536)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data)
    except ValueError:
        return None
    return request if isinstance(request, dict) else None


def _refuse(conn: socket.socket, why: str) -> None:
    with contextlib.suppress(OSError):
        _send(conn, b"e", f"ringleader: {why}\n".encode())
        _send_exit(conn, 255)


def _words(argv: object) -> bool:
    return isinstance(argv, list) and bool(argv) and all(isinstance(w, str) for w in argv)


def _send(conn: socket.socket, kind: bytes, data: bytes) -> None:
    conn.sendall(kind + struct.pack(">I", len(data)) + data)


def _send_exit(conn: socket.socket, code: int) -> None:
    conn.sendall(b"x" + struct.pack(">I", code & 0xFF))


def _stop_when_gone(conn: socket.socket, proc: Popen[bytes]) -> None:
    """The client closed its end (mpirun ended it): the pod's command goes too."""
    with contextlib.suppress(OSError):
        while conn.recv(4096):
            pass
    if proc.poll() is None:
        _stop(proc)


def _stop(proc: Popen[bytes]) -> None:
    """SIGTERM to the container's runtime (it passes it on), SIGKILL if it stays."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=10)
    except TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
