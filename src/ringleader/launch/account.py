"""The one command a non-root server runs as the workloads' OS account, through sudo.

``sudo -n -u ACCOUNT -- PYTHON -I -m ringleader.launch.account VERB ...`` is all
the sudoers rule allows (docs/security.md: ``--run-as account:NAME``), so
everything the server does as the account comes through here:

- ``agent --job-id ID``: this host's agent for a run (it starts the ranks,
  the keepalive and mpirun, all as the account).  It is exec'd with the
  account's identity alone (``HOME``, ``USER``, ``LOGNAME``, ``SHELL``): the
  launch's environment reaches it in its ``setup`` message, never through
  sudo, whose rule passes none (``env_reset``, no ``SETENV``);
- ``prepare DIR CWD``: the workload's directories in the account's home
  (``DIR/work``, ``DIR/checkpoints``, 0700), and whether it can enter ``CWD``;
- ``exec RUN_ID RANK SPAWNS -- ARGV``: an exec session, ``ARGV`` in the directory
  and environment of the pod's live process (which only the account can read;
  through sudo there is no cgroup: found among the account's own processes by the
  agent's spawn record, ``SPAWNS`` as ``spawns_arg`` writes it, and the process
  tree below it, ``pod_process``); ``exec --check RUN_ID RANK SPAWNS`` only says
  whether there is one.  ``SPAWNS`` ``here``: the record this user's agents of the
  run keep in their own run dirs on this host (an SSH node, where the server runs
  this over ssh: ``records_here``);
- ``sweep RUN_ID GRACE``: end every process of the run (by its marker and its
  agent's argv, the only record without a cgroup): the server cannot signal
  another account's processes; ``sweep --check RUN_ID``: is any left;
- ``check [PATH ...]``: the server's dry run at start: who this runs as,
  which variables sudo let through, which PATHs it can read (none may be).

Exit codes: 0 done, 2 bad usage, 3 nothing found (``exec``, ``sweep --check``),
4 a working directory the account cannot enter, 127 a command that cannot run.

Invariants: standard library, ``ringleader.launch`` and ``ringleader.tenantfs`` only, imported where
needed (the workload's interpreter needs nothing else, and links imports
``sudo_argv`` on the agent's path); ``-I`` keeps ``PYTHON*`` variables, the
user's site directory and the working directory off ``sys.path``; argv lists
only, nothing reaches a shell.
"""

from __future__ import annotations

import json
import os
import sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (start-up time)
if TYPE_CHECKING:
    from collections.abc import Collection, Mapping, Sequence

MODULE = "ringleader.launch.account"
NOT_FOUND = 3
CANNOT_ENTER = 4
#: What the account's own processes keep of sudo's environment: who they are.
IDENTITY = ("HOME", "USER", "LOGNAME", "SHELL")
MPIRUN_NAMES = ("mpirun", "mpiexec", "orterun", "prterun")
#: ``exec``'s SPAWNS for "the records of this host's agents" (``records_here``).
HERE = "here"


def sudo_argv(sudo: str, account: str, python: str, *args: str) -> list[str]:
    """``VERB ARGS`` of this module run as ``account`` by ``sudo`` (non-interactive:
    a password prompt would hang the server, so a missing rule fails at once)."""
    return [sudo, "-n", "-u", account, "--", python, "-I", "-m", MODULE, *args]


def sudo_rule(server: str, account: str, python: str) -> str:
    """The sudoers line that allows exactly this module as ``account``, no variables."""
    return f"{server} ALL=({account}) NOPASSWD: {python} -I -m {MODULE} *"


# ----- a pod's live process (also the server's, where it may read /proc itself) -----
def pod_process(
    rank: int,
    *,
    uid: int,
    spawns: Mapping[int, tuple[int, int]] | None = None,
    members: Collection[int] | None = None,
) -> tuple[int, dict[str, str]] | None:
    """The pod's process that is this rank (or the launcher, mpirun), with its
    environment, found by kernel facts only: it runs as ``uid`` (the pod's account,
    real and effective) and is the pod's: one of its cgroup's ``members``, or, where
    the pod has no cgroup, the process the agent recorded spawning for the rank or
    one below a recorded spawn (``spawns``: rank -> pid and start time, the run's
    record; a recorded pid counts while the same process lives).  It is the rank's
    own recorded process while that lives; else (ranks mpirun started, a rank that
    ended and left its children) the oldest of the pod's processes that is the rank,
    else, in a cgroup, its oldest member: an environment only tells apart processes
    already known to be the pod's, never makes one the pod's (docs/security.md)."""
    from ringleader.launch.procs import descendants, process_environ, start_ticks
    from ringleader.launch.spawned import is_spawned, runs_as

    spawns = spawns or {}
    live = {r: pid for r, (pid, ticks) in spawns.items() if is_spawned(pid, ticks)}
    mine = live.get(rank)
    if mine is not None and (members is None or mine in members) and runs_as(mine, uid):
        env = process_environ(mine)
        if env is not None:
            return mine, env
    if members is None:  # the rank's own tree (under a sudo wrapper, say), else the run's
        pool: Collection[int] = descendants([mine] if mine is not None else live.values())
    else:
        pool = members
    found: list[tuple[bool, int, int, dict[str, str]]] = []
    for pid in pool:
        env = process_environ(pid) if runs_as(pid, uid) else None
        ticks = start_ticks(pid)
        if env is None or ticks is None:
            continue
        rank_is = _is_rank(pid, env, rank)
        if members is None and not rank_is:
            continue
        found.append((not rank_is, ticks, pid, env))
    if not found:
        return None
    _, _, pid, env = min(found, key=lambda item: item[:3])
    return pid, env


def spawns_arg(spawns: Mapping[int, tuple[int, int]]) -> str:
    """The run's spawn record as one argument of ``exec`` ("-" when there is none)."""
    return ",".join(f"{r}:{pid}:{ticks}" for r, (pid, ticks) in sorted(spawns.items())) or "-"


def parse_spawns(text: str, run_id: str = "") -> dict[int, tuple[int, int]] | None:
    """``spawns_arg``'s text back (``here``: ``records_here(run_id)``); None when it is
    not one."""
    if text == HERE:
        return records_here(run_id)
    found: dict[int, tuple[int, int]] = {}
    for item in text.split(",") if text != "-" else []:
        fields = item.split(":")
        if len(fields) != 3 or not all(f.lstrip("-").isdigit() for f in fields):
            return None
        rank, pid, ticks = map(int, fields)
        found[rank] = (pid, ticks)
    return found


def records_here(run_id: str) -> dict[int, tuple[int, int]]:
    """The spawn records of ``run_id``'s agents on this host that are this user's own:
    in their run dirs (``ringleader-ID-node*`` in the temporary directory, each made
    0700 by its agent), only those this user made and no one else can enter, never
    through a link (anyone may name a directory so in /tmp).  Older run dirs first,
    so a later agent's record of a rank (a restart) wins."""
    import stat

    from ringleader.launch.rank_process import run_dir_prefix, temp_dir
    from ringleader.launch.spawned import SPAWNED_FILE, recorded

    base, prefix = temp_dir(), run_dir_prefix(run_id)
    dirs = []
    with os.scandir(base) as entries:
        for entry in entries:
            if not entry.name.startswith(prefix):
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            own = info.st_uid == os.getuid() and not info.st_mode & 0o077
            if stat.S_ISDIR(info.st_mode) and own:
                dirs.append((info.st_mtime_ns, entry.path))
    found: dict[int, tuple[int, int]] = {}
    for _, path in sorted(dirs):
        found.update(recorded(os.path.join(path, SPAWNED_FILE)))
    return found


def _is_rank(pid: int, env: dict[str, str], rank: int) -> bool:
    """Whether a process (already known to be the pod's) is ``rank``: mpirun for the
    launcher, else the rank its environment names."""
    from ringleader.launch.frameworks import LAUNCHER_RANK
    from ringleader.launch.procs import process_argv

    if rank == LAUNCHER_RANK:
        argv = process_argv(pid) or [b""]
        return os.path.basename(argv[0].decode(errors="replace")) in MPIRUN_NAMES
    return str(rank) in (env.get("RANK"), env.get("OMPI_COMM_WORLD_RANK"))


def sweep(run_id: str, grace_s: float) -> None:
    """SIGTERM, grace, SIGKILL for whatever of the job this user can see (agents, ranks).

    Returns once none is left (a SIGKILLed process takes a moment to go), or
    after a few seconds if one cannot be killed (a process stuck in the kernel).
    """
    import time

    from ringleader.launch.procs import job_processes, terminate

    pids = job_processes(run_id)
    if not pids:
        return
    terminate(pids, grace_s, marker=f"RINGLEADER_JOB_ID={run_id}")
    deadline = time.monotonic() + 5.0
    while job_processes(run_id) and time.monotonic() < deadline:
        time.sleep(0.02)


# ----- the verbs ---------------------------------------------------------------------
def _agent(args: list[str]) -> int:
    if len(args) != 2 or args[0] != "--job-id" or not args[1]:
        return _usage("agent --job-id ID")
    identity = {k: os.environ[k] for k in IDENTITY if k in os.environ}
    env = {"PATH": "/usr/bin:/bin", **identity}
    argv = [sys.executable, "-I", "-m", "ringleader.launch.agent", "--job-id", args[1]]
    os.execve(sys.executable, argv, env)
    return 127  # not reached


def _prepare(args: list[str]) -> int:
    if len(args) != 2:
        return _usage("prepare DIR CWD")
    own, cwd = args
    try:
        for sub in ("work", "checkpoints"):
            path = os.path.join(own, sub)
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.chmod(path, 0o700)
    except OSError as exc:
        print(f"cannot make {own}: {exc.strerror}", file=sys.stderr)
        return 1
    try:
        os.chdir(cwd)
    except OSError as exc:
        print(f"cannot enter {cwd}: {exc.strerror}", file=sys.stderr)
        return CANNOT_ENTER
    return 0


def _exec(args: list[str]) -> int:
    check = args[:1] == ["--check"]
    head = args[1:] if check else args
    run_id, rank, spawns, rest = head[0:1], head[1:2], head[2:3], head[3:]
    command = rest[1:] if rest[:1] == ["--"] else []
    record = parse_spawns(spawns[0], run_id[0] if run_id else "") if spawns else None
    if not (
        run_id
        and rank
        and rank[0].lstrip("-").isdigit()
        and record is not None
        and (not rest if check else command)
    ):
        return _usage("exec RUN_ID RANK SPAWNS -- ARGV | exec --check RUN_ID RANK SPAWNS")
    # Through sudo there is no cgroup: the agent's spawn record (which the server read
    # and passed) says which processes are the pod's; only this account's are taken.
    found = pod_process(int(rank[0]), uid=os.getuid(), spawns=record)
    if found is None:
        print(f"no running process of rank {rank[0]} of {run_id[0]}", file=sys.stderr)
        return NOT_FOUND
    if check:
        return 0
    import shutil

    pid, env = found
    for where in (f"/proc/{pid}/cwd", env.get("HOME") or "/", "/"):
        try:
            os.chdir(os.path.realpath(where))
            break
        except OSError:
            continue
    path = shutil.which(command[0], path=env.get("PATH", os.defpath))
    try:
        os.execve(path or command[0], command, env)
    except OSError as exc:
        why = exc.strerror if path or "/" in command[0] else "command not found"
        print(f"cannot run {command[0]!r}: {why}", file=sys.stderr)
    return 127


def _sweep(args: list[str]) -> int:
    if args[:1] == ["--check"] and len(args) == 2:
        from ringleader.launch.procs import job_processes

        return 0 if job_processes(args[1]) else NOT_FOUND
    try:
        run_id, grace = args
        sweep(run_id, float(grace))
    except ValueError:
        return _usage("sweep RUN_ID GRACE_SECONDS | sweep --check RUN_ID")
    return 0


def reachable(path: str) -> bool:
    """Whether this user can list (a directory) or read (a file) ``path``."""
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as f:
                f.read(1)
    except OSError:
        return False
    return True


def _check(paths: Sequence[str]) -> int:
    print(
        json.dumps(
            {
                "uid": os.getuid(),
                "gid": os.getgid(),
                "environ": sorted(os.environ),
                "reachable": [p for p in paths if reachable(p)],
            }
        )
    )
    return 0


def _usage(what: str) -> int:
    print(f"usage: python -I -m {MODULE} {what}", file=sys.stderr)
    return 2


VERBS = {"agent": _agent, "prepare": _prepare, "exec": _exec, "sweep": _sweep, "check": _check}


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] not in VERBS:
        return _usage(f"{{{','.join(VERBS)}}} ...")
    # Through sudo the rule names an unprivileged account: root is a mistake.  Over
    # ssh to a node (``exec ... here``) it is whoever the server logs in as, root too.
    over_ssh = args[0] == "exec" and HERE in args[1:5]
    if os.getuid() == 0 and not over_ssh:
        print(f"{MODULE}: refusing to run as root", file=sys.stderr)
        return 2
    return VERBS[args[0]](args[1:])


if __name__ == "__main__":
    sys.exit(main())
