"""The supervisor of the ``mpi`` framework: one agent here runs ``mpirun``.

mpirun starts the ranks on every host itself (over ssh, as MPI users expect);
the local agent owns mpirun's process group, so fail-fast, Ctrl-C, restarts
and no-orphans work exactly as for PyTorch ranks.  Output arrives tagged by
mpirun (``[1,R]<stdout>:``) and is re-prefixed as ``[R/W host]``; the
per-rank exit lines of ``mpi_rank`` give the root cause.
"""

from __future__ import annotations

import json
import os
import re
from collections import deque
from typing import Any

from ringleader.hosts import Host
from ringleader.launch.frameworks import LAUNCHER_RANK
from ringleader.launch.mpi_rank import EXIT_MARKER
from ringleader.launch.mpirun import mpirun_argv
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
from ringleader.launch.supervisor import STDERR_TAIL_LINES, Supervisor

_TAG = re.compile(r"^\[\d+,(\d+)\]<(stdout|stderr)>:(.*)$")
MPIRUN = LAUNCHER_RANK  # pseudo-rank for mpirun's own lines
MPIRUN_NOTICE = "mpirun: "  # how mpirun's own lines reach the sink's notice()


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
        self._exits: dict[int, dict[str, Any]] = {}
        self._rank_hosts = [h for h in spec.hosts for _ in range(h.slots)]

    def _banner(self, facts: list[NodeFacts]) -> None:
        spec = self.spec
        hosts = ", ".join(f"{h.name}:{h.slots}" for h in spec.hosts)
        self.sink.notice(f"job {spec.run_id}: {spec.world_size} ranks started by mpirun on {hosts}")

    def _build_plan(self, attempt: int, facts: list[NodeFacts], port: int) -> LaunchPlan:
        self._exits = {}
        rundir = facts[0].rundir
        hostfile_path = f"{rundir}/hostfile"
        master = self.spec.hosts[0].address if not self.spec.hosts[0].is_local else "127.0.0.1"
        argv = mpirun_argv(
            self.spec,
            hostfile_path=hostfile_path,
            error_dir=attempt_dir(rundir, attempt),
            attempt=attempt,
            master_addr=master,
            master_port=port,
            ssh=self.ssh,
            as_root=os.geteuid() == 0,
        )
        env = {"RINGLEADER_JOB_ID": self.spec.run_id, "PYTHONUNBUFFERED": "1"}
        if os.geteuid() == 0:
            env |= {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        launcher = RankPlan(
            rank=MPIRUN,
            local_rank=0,
            node_rank=0,
            argv=argv,
            env=env,
            env_defaults={},
            error_file=f"{attempt_dir(rundir, attempt)}/mpirun.error.json",
        )
        text = "".join(
            f"{h.address if not h.is_local else 'localhost'} slots={h.slots}\n"
            for h in self.spec.hosts
        )
        return LaunchPlan(
            run_id=self.spec.run_id,
            attempt=attempt,
            world_size=self.spec.world_size,
            master_addr=master,
            master_port=port,
            nodes=[NodePlan(0, self.agent_hosts[0], [launcher], hostfile_path)],
            hostfile_text=text,
        )

    def _emit(self, plan: LaunchPlan, msg: dict[str, Any], tails: dict[int, deque[str]]) -> None:
        match = _TAG.match(msg["line"])
        if match is None:  # mpirun's own words
            rank, stream, text, host = MPIRUN, msg["stream"], msg["line"], "mpirun"
        else:
            rank, stream, text = int(match.group(1)), match.group(2), match.group(3)
            host = self._rank_hosts[rank].name if rank < len(self._rank_hosts) else "?"
            if stream == "stderr" and text.startswith(EXIT_MARKER):
                info = json.loads(text[len(EXIT_MARKER) :])
                self._exits[rank] = info
                self.observer.on_rank_exit(
                    plan.attempt, rank, int(info["code"]), info.get("signal")
                )
                return
        if rank == MPIRUN:
            self.sink.notice(MPIRUN_NOTICE + text)
        else:
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

    def _failure(
        self, plan: LaunchPlan, rank: int, msg: dict[str, Any], tails: dict[int, deque[str]]
    ) -> RankFailure:
        failed = sorted(
            ((e["t"], r, e) for r, e in self._exits.items() if e.get("code")), key=lambda x: x[0]
        )
        if not failed:
            return RankFailure(
                rank=None,
                host="mpirun",
                code=int(msg["code"]),
                signal=msg.get("signal"),
                time=float(msg.get("t") or 0),
                stderr_tail=list(tails.get(MPIRUN, [])),
                reason="mpirun failed before any rank reported an exit",
            )
        t, first, info = failed[0]
        return RankFailure(
            rank=first,
            host=self._rank_hosts[first].name,
            code=int(info["code"]),
            signal=info.get("signal"),
            time=float(t),
            stderr_tail=list(tails.get(first, [])),
            error=info.get("error"),
        )
