"""The agent <-> supervisor wire: one JSON object per line over the agent's stdio.

The link is the agent's stdin.  When it reaches EOF (the supervisor died,
even by ``kill -9``, or the SSH connection dropped) or stays silent past the
heartbeat timeout, the agent stops its ranks: that is how no orphan is left.

Supervisor -> agent ops:
  setup  {run_id, cwd, master_addr, want_port, ring_ports, network_interface, rendezvous}
                           ring_ports: how many free ports to pick (MLX's ring);
                           rendezvous (node 0, Horovod's): "module:function" served on
                           the master port it reports, anew for each attempt ("port")
  start  {attempt, ranks: [{rank, argv, env, env_defaults, error_file}], hostfile,
          hostfile_path, files: {path: text}}   files: written before any rank starts
  stop   {grace}           stop the ranks of the current attempt
  port   {ring_ports}      find fresh free ports (a restart's new rendezvous)
  ping   {}                heartbeat
  bye    {}                clean exit
Agent -> supervisor ops:
  ready  {hostname, cores, rundir, interface, interface_address, port, ring_ports: [port]}
  fatal  {stage, detail}   the host cannot run ranks (before any started)
  out    {rank, stream: "stdout"|"stderr", line}   line: at most LINE_CAP bytes of
                           the rank's output (UTF-8), plus SPLIT_MARK when the
                           rank's line goes on in the next ``out``
  exit   {rank, code, signal, t, error, raised?, reason?}   error: the recorded
                           traceback, if any; raised: t is when its exception escaped,
                           not its exit; reason: why a rank still running was reported
                           (teardown.py)
  stopped {}               every rank of the attempt is gone
  port   {port, ring_ports}
"""

from __future__ import annotations

import json
import threading

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from typing import IO, Any

HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0
#: The longest piece of a rank's line sent in one ``out`` (bytes of its output).
LINE_CAP = 1 << 20
SPLIT_MARK = " [line split: over 1 MiB]"
#: The longest message either side reads whole: an ``out`` of LINE_CAP bytes,
#: each escaped by JSON to at most 6 (``\u0000``), and its fields.
MESSAGE_CAP = 6 * LINE_CAP + 4096


def bounded_lines(stream: IO[bytes], cap: int = MESSAGE_CAP) -> Iterator[tuple[bytes, bool]]:
    """``(line, whole)`` for each line of ``stream``, never holding more than ``cap`` bytes.

    A line longer than ``cap`` yields its first ``cap`` bytes with ``whole``
    False; the rest of it is read in bounded steps and dropped.
    """
    while True:
        raw = stream.readline(cap)
        if not raw:
            return
        if len(raw) < cap or raw.endswith(b"\n"):
            yield raw, True
            continue
        rest = raw
        while rest and not rest.endswith(b"\n"):
            rest = stream.readline(cap)
        yield raw, False


def encode(op: str, **fields: Any) -> bytes:
    return (json.dumps({"op": op, **fields}, separators=(",", ":")) + "\n").encode()


def decode(line: bytes | str) -> dict[str, Any]:
    msg = json.loads(line)
    if not isinstance(msg, dict) or "op" not in msg:
        raise ValueError(f"not a protocol message: {line!r}")
    return msg


class MessageWriter:
    """Writes whole messages to a binary stream; safe from many threads."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.broken = False

    def send(self, op: str, **fields: Any) -> bool:
        data = encode(op, **fields)
        with self._lock:
            if self.broken:
                return False
            try:
                self._stream.write(data)
                self._stream.flush()
            except (BrokenPipeError, OSError, ValueError):
                self.broken = True
                return False
        return True
