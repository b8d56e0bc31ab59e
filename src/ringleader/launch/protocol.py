"""The agent <-> supervisor wire: one JSON object per line over the agent's stdio.

The link is the agent's stdin.  When it reaches EOF (the supervisor died,
even by ``kill -9``, or the SSH connection dropped) or stays silent past the
heartbeat timeout, the agent stops its ranks: that is how no orphan is left.

Supervisor -> agent ops:
  setup  {run_id, cwd, master_addr, want_port, network_interface}
  start  {attempt, ranks: [{rank, argv, env, env_defaults, error_file}], hostfile, hostfile_path}
  stop   {grace}           stop the ranks of the current attempt
  port   {}                find a fresh free port (a restart's new rendezvous)
  ping   {}                heartbeat
  bye    {}                clean exit
Agent -> supervisor ops:
  ready  {hostname, cores, rundir, interface, interface_address, port}
  fatal  {stage, detail}   the host cannot run ranks (before any started)
  out    {rank, stream: "stdout"|"stderr", line}
  exit   {rank, code, signal, t, error}   error: the recorded traceback, if any
  stopped {}               every rank of the attempt is gone
  port   {port}
"""

from __future__ import annotations

import json
import threading

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from typing import IO, Any

HEARTBEAT_INTERVAL_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0


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
