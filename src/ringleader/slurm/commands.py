"""The one place that runs Slurm's command-line clients.

Why the CLI and not a library: ``sbatch``, ``scancel``, ``scontrol`` and ``sinfo`` are
what every Slurm site has and keeps compatible; their text is parsed here only, into
``JobInfo`` and ``JobState``, so callers never read Slurm's output themselves.

Invariants:
- argv only, never a shell: a job id or partition reaches Slurm as one word, and job
  ids are checked to be ids (``123``, ``123_4``, ``123+1``) before they do;
- every failure is a ``SlurmError`` naming the command and Slurm's own words, with a
  fix where one is known (client not installed, no ``SLURM_CONF``, controller down);
- ``cancel`` is idempotent: a job that ended or that Slurm forgot is not an error;
- ``job_info`` falls back to accounting (``sacct``) for a job slurmctld forgot (past
  ``MinJobAge``), and returns None when neither knows it.
"""

from __future__ import annotations

import enum
import os
import re
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field

from ringleader.errors import RingleaderError

__all__ = [
    "JobInfo",
    "JobState",
    "SlurmError",
    "accounted_job",
    "cancel",
    "hostnames",
    "is_job_id",
    "job_info",
    "parse_accounting_line",
    "parse_job_record",
    "partitions",
    "run_slurm",
    "submit",
]

_JOB_ID = re.compile(r"\d+(?:[_+]\d+)?")
_FIELD_START = re.compile(r" (?=[A-Za-z][A-Za-z0-9:/_]*=)")
# Slurm's words for a job it does not know, or one that already ended.
_GONE = ("Invalid job id specified", "already completing or completed")
# (fragment of Slurm's stderr, the fix to print)
_KNOWN_FIXES = (
    ("Could not establish a configuration source",
     "point SLURM_CONF at the cluster's slurm.conf (or run on a node of the cluster)"),
    ("Unable to contact slurm controller",
     "check that slurmctld runs and is reachable (`scontrol ping`)"),
    ("Invalid partition name", "list the partitions with `sinfo -s`"),
    ("Invalid account", "list your accounts with `sacctmgr show associations user=$USER`"),
    ("Requested node configuration is not available",
     "ask for fewer nodes, CPUs, memory or GPUs per node (see `sinfo -N -l`)"),
)  # fmt: skip


class SlurmError(RingleaderError):
    """A Slurm command failed: which command, Slurm's own line, and a fix when known."""

    exit_code = 1

    def __init__(self, command: str, detail: str, fix: str = "") -> None:
        self.command = command
        self.detail = detail
        self.fix = fix
        text = f"{command} failed: {detail}"
        super().__init__(text + (f"\n  fix: {fix}" if fix else ""))


class JobState(str, enum.Enum):
    """Slurm's job states (``scontrol``/``squeue``/``sacct`` spell them the same)."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    NODE_FAIL = "NODE_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    BOOT_FAIL = "BOOT_FAIL"
    DEADLINE = "DEADLINE"
    REQUEUED = "REQUEUED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    REQUEUE_FED = "REQUEUE_FED"
    RESIZING = "RESIZING"
    REVOKED = "REVOKED"
    SIGNALING = "SIGNALING"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STAGE_OUT = "STAGE_OUT"
    STOPPED = "STOPPED"
    SUSPENDED = "SUSPENDED"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    UNKNOWN = "UNKNOWN"

    @classmethod
    def parse(cls, text: str) -> JobState:
        """``CANCELLED by 0`` -> CANCELLED; a word Slurm adds later -> UNKNOWN."""
        word = text.split()[0].upper() if text.strip() else ""
        try:
            return cls(word)
        except ValueError:
            return cls.UNKNOWN

    @property
    def ended(self) -> bool:
        """The job is over: no process of it runs, and Slurm will not start it again."""
        return self in _ENDED

    @property
    def waiting(self) -> bool:
        """Slurm has not started the job (yet, or again after a requeue)."""
        return self in _WAITING


_ENDED = frozenset({
    JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT,
    JobState.NODE_FAIL, JobState.PREEMPTED, JobState.OUT_OF_MEMORY, JobState.BOOT_FAIL,
    JobState.DEADLINE, JobState.REVOKED, JobState.SPECIAL_EXIT,
})  # fmt: skip
_WAITING = frozenset({
    JobState.PENDING, JobState.CONFIGURING, JobState.REQUEUED, JobState.REQUEUE_HOLD,
    JobState.REQUEUE_FED, JobState.RESV_DEL_HOLD,
})  # fmt: skip


@dataclass
class JobInfo:
    """One job as ``scontrol show job`` tells it."""

    job_id: str
    state: JobState
    reason: str | None
    exit_code: int | None  # the batch script's; killed by signal S -> 128 + S
    nodes: list[str]  # expanded, first node first
    node_list: str  # Slurm's compressed form, e.g. rl[1-2]
    stdout_path: str | None
    start_time: str | None  # Slurm's local time, ISO-like; None while unknown
    end_time: str | None
    restarts: int
    raw: dict[str, str] = field(default_factory=dict)


def run_slurm(
    argv: list[str],
    *,
    input: str | None = None,
    timeout: float = 30,
    env: Mapping[str, str] | None = None,
) -> str:
    """Run one Slurm client command and return its stdout (``env``: its whole
    environment, e.g. what a job of sbatch's ``--export=ALL`` may see; None: ours).

    Raises SlurmError: the client missing, a timeout, or a non-zero exit (with
    Slurm's last error line and a fix when one is known).
    """
    command = _name(argv)
    conf = os.environ.get("SLURM_CONF")
    if conf and not os.path.isfile(conf):
        raise SlurmError(
            command,
            f"SLURM_CONF={conf} is not a file",
            "point SLURM_CONF at the cluster's slurm.conf, or unset it to use the default",
        )
    try:
        proc = subprocess.run(
            argv,
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=None if env is None else dict(env),
            start_new_session=True,  # a Ctrl-C at the terminal is ours to handle, not theirs
        )
    except FileNotFoundError:
        raise SlurmError(
            command,
            f"`{argv[0]}` not found: Slurm's client is not installed here (or not on PATH)",
            "install Slurm's client tools (e.g. apt install slurm-client) and set SLURM_CONF "
            "to the cluster's slurm.conf, or run this on a node of the cluster",
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmError(
            command,
            f"no answer within {timeout:g}s",
            "check that slurmctld runs and is reachable (`scontrol ping`)",
        ) from None
    if proc.returncode != 0:
        detail = _error_line(proc.stderr) or f"exit status {proc.returncode}"
        fix = next((f for fragment, f in _KNOWN_FIXES if fragment in proc.stderr), "")
        raise SlurmError(command, detail, fix)
    return proc.stdout


def submit(script: str, env: Mapping[str, str] | None = None) -> str:
    """``sbatch --parsable`` with the script on stdin; returns the new job's id.
    ``env``: sbatch's environment, which the job gets (None: ours)."""
    out = run_slurm(["sbatch", "--parsable"], input=script, env=env).strip()
    job_id = out.splitlines()[-1].split(";")[0].strip() if out else ""
    if not _JOB_ID.fullmatch(job_id):
        raise SlurmError("sbatch", f"answered {out[:200]!r} instead of a job id")
    return job_id


def cancel(job_id: str, *, signal: str | None = None) -> None:
    """Cancel the job (or send it ``signal``: every step and the batch shell).

    Idempotent: a job that already ended, or that Slurm forgot, is fine.
    """
    argv = ["scancel"]
    if signal:
        argv += [f"--signal={signal}", "--full"]
    try:
        run_slurm([*argv, _checked_id(job_id)])
    except SlurmError as error:
        if not any(words in error.detail for words in _GONE):
            raise


def job_info(job_id: str) -> JobInfo | None:
    """The job as ``scontrol show job -o`` tells it; once slurmctld has forgotten it
    (past ``MinJobAge``), as accounting (``sacct``) recorded it; None when neither knows it."""
    try:
        out = run_slurm(["scontrol", "show", "job", "-o", _checked_id(job_id)])
    except SlurmError as error:
        if any(words in error.detail for words in _GONE):
            return accounted_job(job_id)
        raise
    for line in out.splitlines():
        if line.startswith("JobId="):
            return parse_job_record(line)
    return None


def parse_job_record(line: str) -> JobInfo:
    """One ``scontrol show job -o`` line -> JobInfo (pure)."""
    raw = {}
    for item in _FIELD_START.split(line.strip()):
        key, _, value = item.partition("=")
        raw[key] = value.strip()
    node_list = _known(raw.get("NodeList")) or ""
    return JobInfo(
        job_id=raw.get("JobId", ""),
        state=JobState.parse(raw.get("JobState", "")),
        reason=_known(raw.get("Reason")),
        exit_code=_exit_code(raw.get("ExitCode", "")),
        nodes=_expand(node_list),
        node_list=node_list,
        stdout_path=_known(raw.get("StdOut")),
        start_time=_known(raw.get("StartTime")),
        end_time=_known(raw.get("EndTime")),
        restarts=int(raw["Restarts"]) if raw.get("Restarts", "").isdigit() else 0,
        raw=raw,
    )


# sacct's fields for ``accounted_job``, in this order (``-P``: separated by "|").
SACCT_FIELDS = ("JobID", "State", "ExitCode", "Reason", "NodeList", "Start", "End")


def accounted_job(job_id: str) -> JobInfo | None:
    """The job's allocation as Slurm's accounting recorded it (``sacct -X``); None
    without accounting (``accounting_storage/none``: sacct says it is disabled) or
    when it holds no such job.  Only a job slurmctld no longer knows is asked here."""
    argv = ["sacct", "-X", "-n", "-P", "-j", _checked_id(job_id)]
    try:
        out = run_slurm([*argv, f"--format={','.join(SACCT_FIELDS)}"])
    except SlurmError:
        return None
    for line in out.splitlines():
        info = parse_accounting_line(line)
        if info is not None and info.job_id == job_id:
            return info
    return None


def parse_accounting_line(line: str) -> JobInfo | None:
    """One ``sacct -P`` line of ``SACCT_FIELDS`` -> JobInfo (pure); None if malformed.

    sacct writes ``CANCELLED by 0`` where scontrol writes ``CANCELLED``, and
    ``Unknown``/``None`` for a time or reason it lacks."""
    values = line.strip().split("|")
    if len(values) != len(SACCT_FIELDS):
        return None
    raw = dict(zip(SACCT_FIELDS, values, strict=True))
    node_list = "" if raw["NodeList"] == "None assigned" else _known(raw["NodeList"]) or ""
    state_word = raw["State"].split(" ", 1)[0]
    return JobInfo(
        job_id=raw["JobID"],
        state=JobState.parse(state_word),
        reason=_known(raw["Reason"]),
        exit_code=_exit_code(raw["ExitCode"]),
        nodes=_expand(node_list),
        node_list=node_list,
        stdout_path=None,
        start_time=_known(raw["Start"]),
        end_time=_known(raw["End"]),
        restarts=0,
        raw=raw,
    )


def partitions() -> list[str]:
    """The cluster's partition names (``sinfo -h -o %R``), each once, in sinfo's order."""
    out = run_slurm(["sinfo", "-h", "-o", "%R"])
    return list(dict.fromkeys(line.strip() for line in out.splitlines() if line.strip()))


def hostnames(nodelist: str) -> list[str]:
    """``rl[1-2]`` -> ``['rl1', 'rl2']`` (``scontrol show hostnames``)."""
    if not nodelist:
        return []
    out = run_slurm(["scontrol", "show", "hostnames", nodelist])
    return [line.strip() for line in out.splitlines() if line.strip()]


def _name(argv: list[str]) -> str:
    """How errors name a command: ``sbatch``, ``scontrol show job``."""
    return " ".join(argv[:3]) if argv[0] == "scontrol" else argv[0]


def is_job_id(text: str) -> bool:
    """``123``, ``123_4`` (array task) or ``123+1`` (het component)."""
    return bool(_JOB_ID.fullmatch(text))


def _checked_id(job_id: str) -> str:
    if not is_job_id(job_id):
        raise ValueError(f"{job_id!r} is not a Slurm job id")
    return job_id


def _error_line(stderr: str) -> str:
    """Slurm's most telling stderr line, without the ``sbatch: error:`` prefix."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    for line in reversed(lines):
        if "error" in line.lower() or "fatal" in line.lower():
            return re.sub(r"^\w+: (error|fatal): ", "", line)
    return lines[-1] if lines else ""


def _known(value: str | None) -> str | None:
    return None if value in (None, "", "(null)", "Unknown", "None", "N/A") else value


def _exit_code(text: str) -> int | None:
    code, _, sig = text.partition(":")
    if not code.isdigit():
        return None
    if sig.isdigit() and int(sig):
        return 128 + int(sig)
    return int(code)


def _expand(node_list: str) -> list[str]:
    from ringleader.runtime.nodelist import expand_nodelist

    if not node_list:
        return []
    try:
        return expand_nodelist(node_list)
    except ValueError:
        return hostnames(node_list)
