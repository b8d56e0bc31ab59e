"""The supervisor of the ``mpi`` framework: one agent here runs ``mpirun``.

mpirun starts the ranks on every host itself (over ssh, as MPI users expect);
the local agent owns mpirun's process group, so fail-fast, Ctrl-C, restarts
and no-orphans work exactly as for PyTorch ranks.  Output arrives tagged by
mpirun (``[1,R]<stdout>:``, per chunk it read, not per line): ``mpi_output``
rebuilds each rank's lines, which are re-prefixed as ``[R/W host]``.

The root cause of a failure: the rank mpirun reports as the first to fail
(``mpirun noticed that process rank 1 ... exited on signal 9``, ``Process
name: [[J,1],R] / Exit code: N``), with what its ``mpi_rank`` exit line says
(command not found, exit code, signal, the rank's traceback), or mpirun's
words alone when the rank died without one (its wrapper killed); without a
report from mpirun, the earliest non-zero exit line; else mpirun's exit
code and its last words.  Nothing a rank prints can make this
raise: an exit line that does not parse is shown as a line.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from typing import Any

from ringleader.hosts import Host
from ringleader.launch import mpi_bridge
from ringleader.launch.account import MPIRUN_NAMES
from ringleader.launch.frameworks import LAUNCHER_RANK
from ringleader.launch.gang_attempt import STDERR_TAIL_LINES
from ringleader.launch.mpi_output import RankLine, TaggedStream
from ringleader.launch.mpi_rank import EXIT_MARKER
from ringleader.launch.mpirun import (
    hostfile_text,
    launcher_defaults,
    merged_hosts,
    mpirun_argv,
    pods_hostfile_text,
    worker_pod_hosts,
    worker_pods,
)
from ringleader.launch.observer import SupervisorObserver
from ringleader.launch.output import OutputSink
from ringleader.launch.plan import (
    LaunchPlan,
    LaunchSpec,
    NodeFacts,
    NodePlan,
    RankPlan,
    attempt_dir,
)
from ringleader.launch.result import RankFailure
from ringleader.launch.ssh import SSHOptions
from ringleader.launch.supervisor import Supervisor

MPIRUN = LAUNCHER_RANK  # pseudo-rank for mpirun's own lines
#: Where the launcher pod's ``horovodrun`` is (a shell script), and the Python it runs.
HOROVODRUN_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")
PYTHON_VAR = "RINGLEADER_PYTHON"
SHELLS = ("sh", "bash", "dash")
MPIRUN_NOTICE = "mpirun: "  # how mpirun's own lines reach the sink's notice()
MPIRUN_SAID_LINES = 200  # mpirun's own lines kept for its report of a failure
_SIGNALLED = re.compile(r"process rank (\d+) with PID \d+ on node (\S+) exited on signal (\d+)")
_PROCESS = re.compile(r"Process name:\s*\[\[\d+,\d+\],(\d+)\]")
_EXIT_CODE = re.compile(r"Exit code:\s*(\d+)")
_SETPGID_RACE = re.compile(r"plm:rsh: Warning: setpgid\(\d+,\d+\) failed in parent with errno=")


def exit_report(text: str) -> dict[str, Any] | None:
    """The report of an ``mpi_rank`` exit line, or None when it is not one."""
    if not text.startswith(EXIT_MARKER):
        return None
    try:
        report = json.loads(text[len(EXIT_MARKER) :])
    except ValueError:
        return None
    if not isinstance(report, dict) or type(report.get("code")) is not int:
        return None
    return report


def mpirun_reported(said: list[str]) -> tuple[int, int, int | None, str] | None:
    """``(rank, code, signal, sentence)`` of mpirun's own report of a failed rank."""
    text = "\n".join(said)
    found = _SIGNALLED.search(text)
    if found:
        signum = int(found.group(3))
        sentence = f"mpirun: process rank {found.group(1)} exited on signal {signum}"
        return int(found.group(1)), 128 + signum, signum, sentence
    process, code = _PROCESS.search(text), _EXIT_CODE.search(text)
    if process and code:
        rank = int(process.group(1))
        return rank, int(code.group(1)), None, f"mpirun: rank {rank} exited with {code.group(1)}"
    return None


def benign(text: str) -> bool:
    """An mpirun line that says nothing a user can act on: OpenMPI's rsh launcher warns
    when its parent's ``setpgid`` of a child loses the race with the child's exec
    (EACCES, ``plm_rsh_module.c``); the child has put itself in its group already."""
    return bool(_SETPGID_RACE.search(text))


def launches_itself(command: list[str]) -> bool:
    """A command that is itself ``mpirun`` or ``horovodrun``, or a shell's ``-c`` line
    starting with one (Kubeflow's MPIJob: the launcher pod runs the user's launcher):
    the launcher pod runs it as it is, with the gang's hostfile and remote shell as
    OpenMPI's defaults, instead of in each rank (the pod's cgroup join shim in front, if
    any, stays: it runs the launcher in the launcher pod's cgroup)."""
    from ringleader.launch.containers import command_of

    command = command_of(command)
    if command[:1] and os.path.basename(command[0]) in SHELLS and command[1:2] == ["-c"]:
        command = "".join(command[2:3]).split()[:1]
    return bool(command) and os.path.basename(command[0]) in (*MPIRUN_NAMES, "horovodrun")


def horovodrun_path(path: str, python: str) -> dict[str, str]:
    """The launcher pod's ``PATH`` with ringleader's ``horovodrun`` first, and the
    Python it runs with (``launch/bin/horovodrun``)."""
    return {"PATH": f"{HOROVODRUN_DIR}:{path}" if path else HOROVODRUN_DIR, PYTHON_VAR: python}


class MPISupervisor(Supervisor):
    def __init__(
        self,
        spec: LaunchSpec,
        sink: OutputSink,
        ssh: SSHOptions | None = None,
        observer: SupervisorObserver | None = None,
    ) -> None:
        super().__init__(spec, sink, ssh, observer)
        self.agent_hosts = [Host("localhost", "127.0.0.1", 1)]
        # In an image, worker pods on other hosts are started by an agent there.
        self._pod_nodes: dict[str, int] = {}
        if spec.container:
            for pod, host in worker_pod_hosts(spec).items():
                if not host.is_local and host not in self.agent_hosts:
                    self.agent_hosts.append(host)
                self._pod_nodes[pod] = 0 if host.is_local else self.agent_hosts.index(host)
        self._relays: dict[int, int] = {}  # a relayed pod start's id -> its node
        self._exits: dict[int, dict[str, Any]] = {}
        # mpirun numbers ranks in its hostfile's order, one line per machine.
        self._rank_hosts = [h for _, h in merged_hosts(spec.hosts) for _ in range(h.slots)]
        self._streams: dict[str, TaggedStream] = {}
        self._mpirun_said: deque[str] = deque(maxlen=MPIRUN_SAID_LINES)

    def _banner(self, facts: list[NodeFacts]) -> None:
        spec = self.spec
        hosts = ", ".join(f"{h.name}:{h.slots}" for _, h in merged_hosts(spec.hosts))
        self.sink.notice(f"job {spec.run_id}: {spec.world_size} ranks started by mpirun on {hosts}")

    def _build_plan(self, attempt: int, facts: list[NodeFacts], port: int) -> LaunchPlan:
        self._exits = {}
        self._streams = {s: TaggedStream(self.spec.world_size) for s in ("stdout", "stderr")}
        self._mpirun_said.clear()
        rundir = facts[0].rundir
        hostfile_path = f"{rundir}/hostfile"
        master = self.spec.hosts[0].address if not self.spec.hosts[0].is_local else "127.0.0.1"
        image = bool(self.spec.container)
        rsh_agent = mpi_bridge.rsh_agent(rundir) if image else ""
        own = launches_itself(self.spec.command)
        argv = (
            list(self.spec.command)
            if own
            else mpirun_argv(
                self.spec,
                hostfile_path=hostfile_path,
                error_dir=attempt_dir(rundir, attempt),
                attempt=attempt,
                master_addr=master,
                master_port=port,
                ssh=self.ssh,
                as_root=os.geteuid() == 0,
                rsh_agent=rsh_agent,
            )
        )
        # The launcher pod is mpirun: it has the gang's environment and hostfile too, so
        # a shell in it (`ringleader bash`) can start the gang's ranks itself.
        env = {
            **launcher_defaults(self.spec, self.ssh, hostfile_path, rsh_agent),
            **self.spec.env,
            **self.spec.rank_env.get(str(MPIRUN), {}),
            "RINGLEADER_JOB_ID": self.spec.run_id,
            "RINGLEADER_HOSTFILE": hostfile_path,
            "PYTHONUNBUFFERED": "1",
        }
        if os.geteuid() == 0:
            env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        if not image:  # `horovodrun` there is ringleader's (an image brings its own)
            env |= horovodrun_path(env.get("PATH") or os.environ.get("PATH", ""), self.spec.python)
        launcher = RankPlan(
            rank=MPIRUN,
            local_rank=0,
            node_rank=0,
            argv=argv,
            env=env,
            # What each rank's wrapper (mpi_rank) gives it, so ranks a shell there
            # starts by hand share the cores alike (seed 001's bash run was 3x slower).
            env_defaults={"OMP_NUM_THREADS": str(max(1, facts[0].cores // self._per_host()))},
            error_file=f"{attempt_dir(rundir, attempt)}/mpirun.error.json",
        )
        node = NodePlan(0, self.agent_hosts[0], [launcher], hostfile_path)
        hostfile = hostfile_text(self.spec.hosts)
        if image:  # mpirun in the launcher's container, its daemons in the worker pods'
            pods = worker_pods(self.spec)
            hostfile = pods_hostfile_text(pods)
            bridge = {f"{rundir}/{mpi_bridge.CLIENT_FILE}": mpi_bridge.CLIENT_SOURCE}
            mpi_pods = {
                pod: {
                    "rank": ranks[0],
                    "env": self.spec.rank_env.get(str(ranks[0]), {}),
                    "node": self._pod_nodes[pod],
                }
                for pod, ranks in pods.items()
            }
            node = NodePlan(0, node.host, node.ranks, hostfile_path, bridge, mpi_pods)
        nodes = [node]
        for index, host in enumerate(self.agent_hosts[1:], 1):  # their pods' starters
            theirs = {p: v for p, v in node.mpi_pods.items() if v["node"] == index}
            nodes.append(NodePlan(index, host, [], "", {}, theirs))
        self._relays.clear()
        return LaunchPlan(
            run_id=self.spec.run_id,
            attempt=attempt,
            world_size=self.spec.world_size,
            master_addr=master,
            master_port=port,
            nodes=nodes,
            hostfile_text=hostfile,
        )

    def _relay(self, node: int, msg: dict[str, Any]) -> None:
        """MPI in an image across hosts: a pod start (and stop) from mpirun's host to
        the pod's, its output and exit back (mpi_bridge)."""
        op, fields = msg.get("op"), {k: v for k, v in msg.items() if k != "op"}
        rid = msg.get("id")
        if op == "pod_start" and node == 0 and isinstance(rid, int):
            target = self._pod_nodes.get(str(msg.get("pod")))
            if target:
                self._relays[rid] = target
                self.links[target].send(op, **fields)
            else:  # not a pod of another host: its bridge says so
                self.links[0].send("pod_exit", id=rid, code=255)
        elif op == "pod_stop" and node == 0 and rid in self._relays:
            self.links[self._relays[rid]].send(op, **fields)
        elif op in ("pod_out", "pod_exit") and node > 0 and self._relays.get(rid) == node:
            self.links[0].send(op, **fields)

    def _emit(self, plan: LaunchPlan, msg: dict[str, Any], tails: dict[int, deque[str]]) -> None:
        stream = "stderr" if msg.get("stream") == "stderr" else "stdout"
        tagged = self._streams[stream]  # both made with the plan
        for line in tagged.feed(str(msg.get("line", "")), stream):
            self._emit_line(plan, line, tails)

    def _emit_line(self, plan: LaunchPlan, line: RankLine, tails: dict[int, deque[str]]) -> None:
        rank, stream, text = line.rank, line.stream, line.text
        if rank == MPIRUN and benign(text):
            return
        if rank == MPIRUN:
            self._mpirun_said.append(text)
            self.sink.notice(MPIRUN_NOTICE + text)
        else:
            report = exit_report(text) if stream == "stderr" else None
            if report is not None:
                self._exits[rank] = report
                signum = report.get("signal")
                self.observer.on_rank_exit(
                    plan.attempt, rank, report["code"], signum if type(signum) is int else None
                )
                return
            host = self._rank_hosts[rank].name if rank < len(self._rank_hosts) else "?"
            self.sink.line(
                rank=rank,
                world=plan.world_size,
                host=host,
                stream=stream,
                text=text,
                attempt=plan.attempt,
            )
        if stream == "stderr":
            tails.setdefault(rank, deque(maxlen=STDERR_TAIL_LINES)).append(text)

    def _await_stopped(self, plan: LaunchPlan, tails: dict[int, deque[str]]) -> None:
        super()._await_stopped(plan, tails)
        for tagged in self._streams.values():  # what was left without a newline
            for line in tagged.flush():
                self._emit_line(plan, line, tails)

    def _failure(
        self, plan: LaunchPlan, rank: int, msg: dict[str, Any], tails: dict[int, deque[str]]
    ) -> RankFailure:
        reported = mpirun_reported(list(self._mpirun_said))
        if reported is not None and not self._exits.get(reported[0], {}).get("code"):
            # A rank that died without its exit line (its wrapper was killed): the ranks
            # that did report were stopped by mpirun after it, as consequences.
            first, code, signum, sentence = reported
            return RankFailure(
                rank=first,
                host=self._host_name(first),
                code=code,
                signal=signum,
                time=float(msg.get("t") or 0),
                stderr_tail=list(tails.get(first, [])) or list(tails.get(MPIRUN, [])),
                reason=sentence,
            )
        failed = sorted(
            (
                (float(e["t"]) if isinstance(e.get("t"), int | float) else 0.0, r, e)
                for r, e in self._exits.items()
                if e["code"]
            ),
            key=lambda x: x[:2],
        )
        if reported is not None:  # mpirun's first failure, over clocks of several hosts
            failed.sort(key=lambda x: x[1] != reported[0])
        if failed:
            t, first, info = failed[0]
            signum = info.get("signal")
            error = info.get("error")
            return RankFailure(
                rank=first,
                host=self._host_name(first),
                code=info["code"],
                signal=signum if type(signum) is int else None,
                time=t,
                stderr_tail=list(tails.get(first, [])),
                error=error if isinstance(error, dict) else None,
                reason=str(info.get("reason") or ""),
            )
        return RankFailure(
            rank=None,
            host="mpirun",
            code=int(msg["code"]),
            signal=msg.get("signal"),
            time=float(msg.get("t") or 0),
            stderr_tail=list(tails.get(MPIRUN, [])),
            reason="mpirun failed before any rank reported an exit",
        )

    def _per_host(self) -> int:
        """The most ranks one machine of the gang runs (mpirun's hostfile lines)."""
        return max((h.slots for _, h in merged_hosts(self.spec.hosts)), default=1)

    def _host_name(self, rank: int) -> str:
        return self._rank_hosts[rank].name if 0 <= rank < len(self._rank_hosts) else "?"
