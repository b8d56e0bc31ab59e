"""A workload's place in its OS account's home, made by the account itself.

Why as the account: its home is its own, so a directory there may be a link
it planted; root following it could be led to make or chown anything.  Every
step here runs with the account's ids (no supplementary groups), from ``/``,
with argv lists only: switched to by the server itself when it is root, else
through sudo and ``launch/account.py`` (``RunAs.sudo``, ``--run-as account:NAME``).

Layout: ``~/ringleader/WORKLOAD_ID/checkpoints`` (``RINGLEADER_CHECKPOINT_DIR``)
and ``~/ringleader/WORKLOAD_ID/work`` (the working directory when the spec
names none), both 0700.
"""

from __future__ import annotations

import subprocess

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.launch.account import CANNOT_ENTER, sudo_argv
from ringleader.server.backends.base import RunAs
from ringleader.server.backends.local.planning import LocalPlan, account_dir

#: The most a call as the account may take beyond its own work (sudo, an interpreter).
SUDO_TIMEOUT_S = 60.0


def as_account(run_as: RunAs, argv: list[str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` as the account (its ids only, no supplementary groups), from ``/``."""
    return subprocess.run(
        argv,
        user=run_as.uid,
        group=run_as.gid,
        extra_groups=[],
        cwd="/",
        env={"PATH": "/usr/bin:/bin", "HOME": run_as.home},
        capture_output=True,
        text=True,
        check=False,
    )


def through_sudo(
    run_as: RunAs, python: str, *args: str, timeout_s: float = SUDO_TIMEOUT_S
) -> subprocess.CompletedProcess[str]:
    """``launch/account.py ARGS`` as the account, through sudo (a non-root server):
    no variable passed (sudo's rule passes none anyway), from ``/``."""
    argv = sudo_argv(run_as.sudo, run_as.name, python, *args)
    try:
        return subprocess.run(
            argv,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RingleaderError(f"{' '.join(argv[:4])} failed: {exc}") from exc


def prepare_account_dirs(plan: LocalPlan, run_as: RunAs) -> None:
    """The workload's directory in its account's home (``work``, ``checkpoints``), made
    *as the account* (root following a link the account planted could be led anywhere),
    and a check that the account can enter the working directory."""
    own = account_dir(run_as, plan.spec.run_id.removeprefix("rl-"))
    cwd = plan.spec.cwd
    if run_as.sudo:
        done = through_sudo(run_as, plan.spec.python, "prepare", own, cwd)
        made = done.returncode in (0, CANNOT_ENTER)
        entered = done.returncode == 0
    else:
        # metrics: the agent (root here) samples the pods there (launch.podstats)
        made_dirs = [f"{own}/{d}" for d in ("work", "checkpoints", "metrics")]
        done = as_account(run_as, ["mkdir", "-p", "-m", "700", "--", *made_dirs])
        made = entered = done.returncode == 0
        if made:
            check = ["/bin/sh", "-c", 'cd -- "$1"', "ringleader-cwd", cwd]
            entered = as_account(run_as, check).returncode == 0
    if not made:
        raise RingleaderError(
            f"cannot make {own} as {run_as.name}: {done.stderr.strip() or done.returncode}"
        )
    if not entered:
        raise InvalidSpec(
            f"the working directory {cwd} cannot be entered by the workload's OS "
            f"account {run_as.name}: choose one it can use, or none (then {own}/work)",
            "spec.workingDir",
        )
