"""A workload's place in its OS account's home, made by the account itself.

Why as the account: its home is its own, so a directory there may be a link
it planted; root following it could be led to make or chown anything.  Every
step here runs with the account's ids (no supplementary groups), from ``/``,
with argv lists only.

Layout: ``~/ringleader/WORKLOAD_ID/checkpoints`` (``RINGLEADER_CHECKPOINT_DIR``)
and ``~/ringleader/WORKLOAD_ID/work`` (the working directory when the spec
names none), both 0700.
"""

from __future__ import annotations

import subprocess

from ringleader.errors import InvalidSpec, RingleaderError
from ringleader.server.backends.base import RunAs
from ringleader.server.backends.local.planning import LocalPlan, account_dir


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


def prepare_account_dirs(plan: LocalPlan, run_as: RunAs) -> None:
    """The workload's directory in its account's home (``work``, ``checkpoints``), made
    *as the account* (root following a link the account planted could be led anywhere),
    and a check that the account can enter the working directory."""
    own = account_dir(run_as, plan.spec.run_id.removeprefix("rl-"))
    made = as_account(
        run_as, ["mkdir", "-p", "-m", "700", "--", f"{own}/work", f"{own}/checkpoints"]
    )
    if made.returncode != 0:
        raise RingleaderError(
            f"cannot make {own} as {run_as.name}: {made.stderr.strip() or made.returncode}"
        )
    entered = as_account(run_as, ["/bin/sh", "-c", 'cd -- "$1"', "ringleader-cwd", plan.spec.cwd])
    if entered.returncode != 0:
        raise InvalidSpec(
            f"the working directory {plan.spec.cwd} cannot be entered by the workload's OS "
            f"account {run_as.name}: choose one it can use, or none (then {own}/work)",
            "spec.workingDir",
        )
