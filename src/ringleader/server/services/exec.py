"""Where ``exec``/``bash`` into a pod runs, what it runs, and why it ended.

- *place*: the caller's token checked, the pod picked (a full name or its
  suffix, ``worker-1``; by default the master or launcher pod), the backend
  asked for its target.  The environment is exactly the rank's: a pod of an
  MPI gang is found as its ``mpi_rank`` wrapper, whose environment is the
  rank's before the wrapper derives it (``RANK`` from ``OMPI_COMM_WORLD_RANK``,
  the pod's own binding out of ``RINGLEADER_RANK_ENV``), so it is derived here
  the same way.
- *who*: a session runs as the pod's account, so it is the submitter's own
  power: only the submitter, an admin of the workload's project or a global
  admin may open one (anyone else in the project: 403; outside it: 404).
  Someone other than the submitter gets a session without the pod's
  credentials (``CREDENTIAL_VARS``: the submitter's token is theirs alone),
  and the workload records an ``Exec`` event naming who and as which account.
- *shell*: an interactive ``bash`` gets a prompt naming the workload and pod
  (``(dist-int/launcher) user@host:~$``): an rc file that reads the usual
  ones, then prefixes ``PS1``; it is the session's account's, and removed
  once read.  The pod's ``PATH`` stays first (what ``~/.bashrc`` puts in front,
  pyenv's shims say, goes after it), so ``python`` there is the pod's.
- *end*: when a session's process ended by a signal or with an error, why:
  the workload was deleted or stopped, it ended, the pod ended; the session
  then tells the client (``exec_session``'s status carries ``reason``).

Blocking (the database, /proc, SSH in the backend): the WebSocket route
runs these in a thread.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import tempfile
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace

from sqlalchemy.orm import Session

from ringleader.errors import Forbidden, InvalidSpec, NotFound, RingleaderError, Unauthorized
from ringleader.launch.frameworks import HEAD_ROLES
from ringleader.launch.mpi_rank import exec_environment
from ringleader.server import phases
from ringleader.server.auth import pod_project, user_for_token
from ringleader.server.backends import BackendSet
from ringleader.server.backends.base import ExecTarget
from ringleader.server.models import User, Workload
from ringleader.server.services.roles import require_role, role_in
from ringleader.server.services.workloads import get

Readers = Callable[[], AbstractContextManager[Session]]
#: What a pod holds of its submitter's identity (``background/placing.py`` sets the
#: token; a spec or a client may set the others): a session by anyone else drops them.
CREDENTIAL_VARS = ("RINGLEADER_TOKEN", "RINGLEADER_CLIENT_ID", "RINGLEADER_CLIENT_SECRET")
#: Unsets them on the far side of a prefix (sudo, ssh), where the environment is made.
ENV = "/usr/bin/env"
END_WAIT_S = 3.0  # how long a killed session waits for the server to see its workload's end
# bash reads its system-wide rc (Debian's /etc/bash.bashrc) itself, --rcfile or not.
# Read through /dev/fd/N inside a pod's view (exec_session): the server removes the file.
_BASH_RC = r"""case ${{BASH_SOURCE[0]}} in /dev/fd/*) ;; *) rm -f -- "${{BASH_SOURCE[0]}}" ;; esac
__rl_path=$PATH
[ -r "$HOME/.bashrc" ] && . "$HOME/.bashrc"
__rl_added=${{PATH%"$__rl_path"}}
[ "$__rl_added" != "$PATH" ] || __rl_added=$PATH:
PATH=$__rl_path${{__rl_added:+:${{__rl_added%:}}}}
unset __rl_path __rl_added
[ -n "$PS1" ] || PS1='\u@\h:\w\$ '
PS1={label}"$PS1"
"""


@dataclass(frozen=True)
class ExecPlace:
    """Where a session runs: the backend's target and whose pod it is."""

    target: ExecTarget
    workload_id: str
    workload: str  # its name
    pod: str  # the pod's full name
    by: str = ""  # who opened it, when not the submitter ("": the submitter)


def pick_pod(names: list[str], heads: list[str], workload: str, pod: str | None) -> str:
    """The pod asked for (full name or suffix), or the head pod (master, chief,
    launcher), or worker 0 where every pod is a worker (JAX's coordinator)."""
    if pod is None:
        if heads:
            return heads[0]
        if f"{workload}-worker-0" in names:
            return f"{workload}-worker-0"
        raise NotFound("pod", f"{workload}-master-0")
    for candidate in (pod, f"{workload}-{pod}"):
        if candidate in names:
            return candidate
    raise InvalidSpec(f"no such pod in workload {workload!r}; pods: {sorted(names)}", "pod")


def exec_target(
    readers: Readers,
    backends: BackendSet,
    authorization: str,
    workload_id: str,
    pod: str | None,
    writers: Readers | None = None,
) -> ExecPlace:
    """Authorize the ``Authorization`` header's bearer and find where the command runs.

    ``writers``: where the ``Exec`` event of a session by someone other than the
    submitter is recorded (the readers when None: a test's single database)."""
    scheme, _, token = authorization.partition(" ")
    if scheme.lower() != "bearer" or not token:
        raise Unauthorized("missing bearer token; get one with `ringleader token`")
    with readers() as s:
        user = user_for_token(s, token)
        workload = get(s, user, workload_id)
        require_role(s, user, workload.project_id, "run")  # viewers may not exec
        by = "" if workload.created_by == user.id else user.name
        if by:
            require_exec_as_other(s, user, workload)
        names = [p.name for p in workload.pods]
        heads = [p.name for p in workload.pods if p.role in HEAD_ROLES]
        name = pick_pod(names, heads, workload.name, pod)
        handle, phase, backend = workload.handle, workload.phase, workload.backend
        place = (workload.id, workload.name)
    if not handle:
        raise RingleaderError(f"workload {place[1]!r} is {phase}: it has no pods running")
    target = backends.named(backend).exec_target(handle, name)
    target = replace(target, env=exec_environment(target.env))
    if by:
        target = without_credentials(target)
        _record(writers or readers, place[0], name, f"exec by {by} as {account_of(target)}")
    return ExecPlace(target, place[0], place[1], name, by)


def require_exec_as_other(s: Session, user: User, workload: Workload) -> None:
    """A session runs as the workload's account with its files and processes: only
    a project admin or a global admin may open one into someone else's workload."""
    if pod_project(s) is not None:  # a pod's token is no admin (services.roles)
        raise Forbidden(
            f"a pod's token may exec only into its own workloads, not {workload.name!r}"
        )
    if user.is_admin or role_in(s, user, workload.project_id) == "admin":
        return
    raise Forbidden(
        f"only the submitter of workload {workload.name!r} or an admin of its project "
        "may exec into it: the session runs as the submitter's account"
    )


def without_credentials(target: ExecTarget) -> ExecTarget:
    """``target`` without the pod's credential variables: dropped from its environment,
    and, where that is made beyond a prefix (sudo, ssh), unset there by ``env -u``; in
    a container (``podman exec``, whose image may have no ``env``), set empty there."""
    env = {k: v for k, v in target.env.items() if k not in CREDENTIAL_VARS}
    if not target.prefix:
        return replace(target, env=env)
    if target.marked is not None:  # podman exec: blank them (an image may have no env)
        blank = tuple(arg for name in CREDENTIAL_VARS for arg in ("--env", f"{name}="))
        prefix, tty = target.prefix, target.tty_prefix or target.prefix
        return replace(
            target,
            env=env,
            prefix=(*prefix[:-1], *blank, prefix[-1]),  # the container's name comes last
            tty_prefix=(*tty[:-1], *blank, tty[-1]),
        )
    unset = (ENV, *[arg for name in CREDENTIAL_VARS for arg in ("-u", name)], "--")
    tty_prefix = None if target.tty_prefix is None else (*target.tty_prefix, *unset)
    return replace(target, env=env, prefix=(*target.prefix, *unset), tty_prefix=tty_prefix)


def account_of(target: ExecTarget) -> str:
    """The OS account the session runs as: the target's, the one its sudo prefix
    names (``sudo -n -u NAME``), the user of a ``podman exec`` (``--user UID:GID``),
    else the server's own."""
    import pwd

    if target.run_as is not None:
        return target.run_as.name
    prefix = list(target.prefix)
    if "-u" in prefix[:4] and os.path.basename(prefix[0]) == "sudo":
        return prefix[prefix.index("-u") + 1]
    if prefix[1:2] == ["exec"] and "--user" in prefix:
        uid = prefix[prefix.index("--user") + 1].split(":")[0]
        with contextlib.suppress(KeyError, ValueError):
            return pwd.getpwuid(int(uid)).pw_name
        return uid

    try:
        return pwd.getpwuid(os.geteuid()).pw_name
    except KeyError:
        return str(os.geteuid())


def _record(writers: Readers, workload_id: str, pod: str, message: str) -> None:
    with writers() as s, s.begin():
        workload = s.get(Workload, workload_id)
        if workload is not None:
            phases.record_event(s, workload, "Exec", reason="Exec", message=message, pod_name=pod)


def prompt_label(place: ExecPlace) -> str:
    """``(workload/pod)`` for a prompt; the pod without the workload's name before it."""
    pod = place.pod.removeprefix(f"{place.workload}-")
    return f"({place.workload}/{pod}) "


def shell_argv(place: ExecPlace, argv: list[str], tty: bool) -> tuple[list[str], str | None]:
    """``argv`` as run, and the rc file made for it (the caller removes it at the end).

    Only an interactive ``bash`` (on a terminal, no arguments) gets the prompt:
    anything else runs as asked.
    """
    if not (tty and len(argv) == 1 and os.path.basename(argv[0]) == "bash"):
        return argv, None
    if place.target.tty_prefix is not None:  # in a container: its prompt names the pod
        return argv, None
    if place.target.remote:  # on an SSH node: this host's file is not there
        return argv, None
    fd, path = tempfile.mkstemp(prefix="ringleader-bash-", suffix=".rc")
    try:
        account = place.target.run_as
        if account is not None:  # the session's own account reads (and removes) it
            os.fchown(fd, account.uid, account.gid)
        os.write(fd, _BASH_RC.format(label=shlex.quote(prompt_label(place))).encode())
    except OSError:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return argv, None  # a session without the prompt rather than none
    os.close(fd)
    return [argv[0], "--rcfile", path, "-i"], path


def why_ended(readers: Readers, place: ExecPlace, code: int, wait_s: float = END_WAIT_S) -> str:
    """Why the session's process ended with ``code`` (negative: killed by that signal),
    in a sentence for the user, or "" when its own exit says it all."""
    if code == 0:
        return ""
    deadline = time.monotonic() + (wait_s if code < 0 else 0.0)
    while True:
        cause = _workload_end(readers, place)
        if cause or time.monotonic() >= deadline:
            break
        time.sleep(0.1)  # the workload's end may not have been seen yet: it is a poll
    if code < 0:
        how = f"killed by {_signal_name(-code)}"
        return f"{cause}: the session was {how}" if cause else f"the session was {how}"
    return f"{cause}: the session ended with it" if cause else ""


def _workload_end(readers: Readers, place: ExecPlace) -> str:
    """What ended the workload or the pod, or "" while both run."""
    with readers() as s:
        workload = s.get(Workload, place.workload_id)
        if workload is None or workload.deleted_at is not None:
            return f"workload {place.workload} was deleted"
        if workload.desired_phase == "Deleted" or workload.phase in ("Deleting", "Deleted"):
            return f"workload {place.workload} was deleted"
        if workload.desired_phase == "Stopped" or workload.phase in ("Stopping", "Stopped"):
            return f"workload {place.workload} was stopped (suspended)"
        if workload.phase in ("Completed", "Failed"):
            return f"workload {place.workload} ended: {workload.phase}"
        pod = next((p for p in workload.pods if p.name == place.pod), None)
        if pod is not None and pod.phase in ("Succeeded", "Completed", "Failed", "Stopped"):
            return f"pod {place.pod} ended ({pod.phase})"
    return ""


def _signal_name(signum: int) -> str:
    try:
        return f"{signal.Signals(signum).name} (signal {signum})"
    except ValueError:
        return f"signal {signum}"
