"""The supervisor's end of each agent: a child process (local), an ``ssh`` one, or an
``srun`` one (a Slurm job step, ``launch/slurm_srun.py``).

Every message an agent sends lands on one shared queue as ``(node, msg)``;
when an agent's stdout closes, an ``eof`` message carries the tail of its
stderr, so a host that could not start (DNS, auth, missing directory) is
explained.  Both streams are read in bounded lines (``protocol.bounded_lines``):
nothing an agent or the remote side sends can make this process hold more
than one message's worth.  Agents run in their own sessions: a Ctrl-C on the terminal
reaches only the supervisor, which then stops the gang in order.
"""

from __future__ import annotations

import contextlib
import os
import queue
import select
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from subprocess import PIPE, Popen
from typing import Any

from ringleader.hosts import Host
from ringleader.launch.account import sudo_argv
from ringleader.launch.protocol import MessageWriter, bounded_lines, decode
from ringleader.launch.ssh import SSHOptions, agent_command, ssh_argv

Event = tuple[int, dict[str, Any]]
#: An agent's (or ssh's) own stderr line kept in the tail at most this long.
STDERR_LINE_CAP = 16 * 1024


def agent_argv(
    host: Host,
    *,
    python: str,
    cwd: str,
    job_id: str,
    ssh: SSHOptions,
    sudo: tuple[str, str] = ("", ""),
) -> list[str]:
    """How to start the agent for ``host``: directly when local (as the account
    ``sudo[1]`` through the sudo binary ``sudo[0]`` when given), else over SSH."""
    if host.is_local and sudo[0]:
        return sudo_argv(sudo[0], sudo[1], python, "agent", "--job-id", job_id)
    if host.is_local:
        return [python, "-m", "ringleader.launch.agent", "--job-id", job_id]
    return ssh_argv(host.ssh, agent_command(python, cwd, job_id), ssh)


@dataclass
class AgentLink:
    node: int
    host: Host
    proc: Popen[bytes]
    writer: MessageWriter
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=40))
    threads: list[threading.Thread] = field(default_factory=list)
    dead: bool = False  # its eof was seen: it will send nothing more

    def send(self, op: str, **fields: Any) -> bool:
        return self.writer.send(op, **fields)

    def kill(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.proc.kill()

    def wait(self, timeout_s: float) -> bool:
        """True once the agent exited within ``timeout_s``.

        Waits on the end of its output first (a thread join wakes at once), then
        on its exit (``exited``), never on Popen.wait's timed polling, which
        sleeps in growing steps: its output ends a moment before it exits.
        """
        deadline = time.monotonic() + timeout_s
        for thread in self.threads[:1]:
            thread.join(timeout=timeout_s)
        return exited(self.proc, max(0.0, deadline - time.monotonic()))


def exited(proc: Popen[bytes], timeout_s: float) -> bool:
    """Reap ``proc`` once it exits within ``timeout_s``; False if it still runs.

    Woken by the exit itself (a pidfd: Linux 5.3+); elsewhere Popen.wait's polling.
    The pid cannot have been reused: the child is ours and not yet reaped.
    """
    if proc.poll() is not None:
        return True
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        fd = None
    if fd is not None:
        try:
            select.select([fd], [], [], timeout_s)
        finally:
            os.close(fd)
        timeout_s = 0.0  # it ended, or the time is up: one last look either way
    try:
        proc.wait(timeout=timeout_s)
    except Exception:
        return False
    return True


def _tail_text(raw: bytes) -> str:
    """A line for the stderr tail: decoded, at most STDERR_LINE_CAP bytes of it."""
    return raw[:STDERR_LINE_CAP].decode("utf-8", "replace").rstrip()


def _read_messages(link: AgentLink, events: queue.Queue[Event]) -> None:
    assert link.proc.stdout is not None
    for raw, whole in bounded_lines(link.proc.stdout):
        if not whole:  # not our agent's: its messages are bounded (protocol.MESSAGE_CAP)
            link.stderr_tail.append(f"(a message over {len(raw)} bytes, dropped)")
            continue
        try:
            msg = decode(raw)
        except ValueError:
            link.stderr_tail.append(_tail_text(raw))
            continue
        events.put((link.node, msg))
    # stderr may still be arriving: let its reader finish so eof carries it.
    if len(link.threads) > 1:
        link.threads[1].join(timeout=2.0)
    events.put((link.node, {"op": "eof", "stderr": "\n".join(link.stderr_tail)}))


def _read_stderr(link: AgentLink) -> None:
    assert link.proc.stderr is not None
    for raw, _whole in bounded_lines(link.proc.stderr, STDERR_LINE_CAP):
        text = _tail_text(raw)
        link.stderr_tail.append(text)
        if os.environ.get("RINGLEADER_DEBUG_AGENT"):
            print(f"[agent {link.host.name}] {text}", file=sys.stderr)


def start_link(
    node: int,
    host: Host,
    argv: list[str],
    env: dict[str, str] | None,
    events: queue.Queue[Event],
    started: Popen[bytes] | None = None,
    cwd: str | None = None,
    link_type: type[AgentLink] = AgentLink,
) -> AgentLink:
    """Start ``argv`` as ``host``'s agent, or adopt ``started``, one started ahead."""
    proc = started or Popen(
        argv, stdin=PIPE, stdout=PIPE, stderr=PIPE, env=env, cwd=cwd, start_new_session=True
    )
    assert proc.stdin is not None
    link = link_type(node, host, proc, MessageWriter(proc.stdin))
    err = threading.Thread(target=_read_stderr, args=(link,), daemon=True)
    out = threading.Thread(target=_read_messages, args=(link, events), daemon=True)
    link.threads = [out, err]
    err.start()
    out.start()
    return link
