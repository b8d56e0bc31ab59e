"""The Slurm allocation ``ringleader launch`` runs inside: its nodes, their addresses, ranks each.

Nomenclature:
- *allocation*: the job ``salloc`` or ``sbatch`` was granted; the launcher sees it in its
  environment (``SLURM_JOB_ID``, ``SLURM_JOB_NODELIST``) and runs on the login node
  (``salloc``) or on the allocation's first node (an sbatch script).
- *node*: a Slurm node name (``rl1``, ``gpu-017``); its *address* is Slurm's ``NodeAddr``,
  what the other nodes reach it at (by default the name itself).
- *tasks per node*: the ranks each node runs: ``--nproc-per-node`` when given, else what the
  allocation says (``SLURM_NTASKS_PER_NODE``, then ``SLURM_TASKS_PER_NODE``), else 1.

Why ``scontrol`` and not only our own parser: Slurm's node lists have more forms than the
common ones ``runtime/nodelist.py`` reads, and ``scontrol show hostnames`` is the reference.
Our parser still reads the list first, so a malformed one (which ``scontrol`` expands into
garbage with exit status 0) and a huge one are refused with the variable named.

Invariants: only the standard library (``launch`` starts light); every failure is an
``InvalidSpec`` naming the variable or the command, so the CLI prints one line and exits 2;
the commands run are injected (``Runner``), so unit tests need no Slurm.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ringleader.errors import InvalidSpec
from ringleader.hosts import Host
from ringleader.runtime.nodelist import expand_nodelist, expand_tasks_per_node

#: A node list longer than this (characters) or naming more nodes is refused.
MAX_NODELIST_CHARS = 64 * 1024
MAX_NODES = 10_000
SCONTROL_TIMEOUT_S = 30.0
#: How long a failed launch waits for a COMPLETING job's final state (``ended_by_slurm``).
COMPLETING_SETTLE_S = 5.0
#: argv -> stdout; raises InvalidSpec naming the command when it fails.
Runner = Callable[[list[str]], str]

_BRACKET = re.compile(r"\[([^\]]*)\]")
_RANGE = re.compile(r"\s*(\d+)(?:-(\d+))?\s*")
_NODE = re.compile(r"[A-Za-z0-9_.-]+")


@dataclass(frozen=True)
class Allocation:
    """A Slurm job's nodes as ``launch`` uses them, in Slurm's order (node 0 runs rank 0)."""

    job_id: str
    nodelist: str  # as Slurm wrote it (compressed: ``rl[1-2]``)
    nodes: tuple[str, ...]
    addresses: tuple[str, ...]
    tasks_per_node: tuple[int, ...]
    tasks_from: str  # where tasks_per_node came from: a variable's name, or "default"

    def hosts(self) -> list[Host]:
        """One ``Host`` per node: its name, its NodeAddr, its tasks as slots."""
        return [
            Host(ssh=node, address=addr, slots=slots)
            for node, addr, slots in zip(
                self.nodes, self.addresses, self.tasks_per_node, strict=True
            )
        ]

    def describe(self) -> str:
        """One short line for stderr: which job and nodes this launch uses."""
        count = len(self.nodes)
        return (
            f"in Slurm job {self.job_id}: {count} node{'s' if count != 1 else ''} "
            f"{self.nodelist} through srun (--no-slurm: run here)"
        )


def job_id(environ: Mapping[str, str]) -> str | None:
    """The allocation's job id when this process runs inside one, else None."""
    return environ.get("SLURM_JOB_ID", "").strip() or None


def nodelist_of(environ: Mapping[str, str]) -> tuple[str, str]:
    """(variable, value) of the allocation's compressed node list; InvalidSpec when missing."""
    for name in ("SLURM_JOB_NODELIST", "SLURM_NODELIST"):
        if environ.get(name, "").strip():
            return name, environ[name].strip()
    raise InvalidSpec(
        f"SLURM_JOB_ID={job_id(environ)} is set but the node list is not "
        "(run launch inside salloc or an sbatch script, or pass --no-slurm)",
        "SLURM_JOB_NODELIST",
    )


def count_nodes(nodelist: str) -> int:
    """How many names ``nodelist`` expands to, without expanding it (for the bound)."""
    total = 0
    for item in _split(nodelist):
        product = 1
        for body in _BRACKET.findall(item):
            size = 0
            for part in body.split(","):
                match = _RANGE.fullmatch(part)
                if not match:
                    raise ValueError(f"bad range {part!r}")
                lo, hi = int(match.group(1)), int(match.group(2) or match.group(1))
                size += max(0, hi - lo + 1)
            product *= size
        total += product
    return total


def _split(nodelist: str) -> list[str]:
    """Top-level comma-separated items (commas inside brackets belong to the item)."""
    items, depth, start = [], 0, 0
    for i, ch in enumerate(nodelist):
        depth += {"[": 1, "]": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            items.append(nodelist[start:i])
            start = i + 1
    items.append(nodelist[start:])
    return [item for item in items if item.strip()]


def check_nodelist(name: str, value: str) -> list[str]:
    """Our own reading of the node list: InvalidSpec naming ``name`` when malformed or huge."""
    if len(value) > MAX_NODELIST_CHARS:
        raise InvalidSpec(f"longer than {MAX_NODELIST_CHARS} characters", name)
    try:
        count = count_nodes(value)
        if count > MAX_NODES:
            raise InvalidSpec(f"names {count} nodes, more than {MAX_NODES}", name)
        nodes = expand_nodelist(value)
    except ValueError as exc:
        raise InvalidSpec(f"malformed Slurm node list {value!r}: {exc}", name) from None
    bad = next((n for n in nodes if not n or n.startswith("-") or not _NODE.fullmatch(n)), None)
    if bad is not None:
        raise InvalidSpec(f"malformed Slurm node list {value!r}: bad node name {bad!r}", name)
    return nodes


def run_command(argv: list[str]) -> str:
    """Run a Slurm client command; its stdout, or InvalidSpec naming it and Slurm's words."""
    if shutil.which(argv[0]) is None:
        raise InvalidSpec(
            "not found on PATH; inside a Slurm allocation launch needs Slurm's client "
            "commands (scontrol, srun), or pass --no-slurm",
            argv[0],
        )
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=SCONTROL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise InvalidSpec(f"could not run: {exc}", " ".join(argv[:3])) from None
    if proc.returncode != 0:
        words = " ".join(proc.stderr.split())[:300] or f"exit status {proc.returncode}"
        raise InvalidSpec(words, " ".join(argv[:3]))
    return proc.stdout


def node_addresses(nodes: list[str], nodelist: str, run: Runner) -> list[str]:
    """Each node's ``NodeAddr`` (one ``scontrol show node`` for the whole list)."""
    out = run(["scontrol", "show", "node", "-o", nodelist])
    found: dict[str, str] = {}
    for line in out.splitlines():
        fields = dict(word.partition("=")[::2] for word in line.split() if "=" in word)
        if fields.get("NodeName"):
            found[fields["NodeName"]] = fields.get("NodeAddr") or fields["NodeName"]
    return [found.get(node, node) for node in nodes]


def tasks_per_node(
    environ: Mapping[str, str], node_count: int, nproc_per_node: int | None
) -> tuple[list[int], str]:
    """Ranks per node and where that came from (see the module docstring)."""
    if nproc_per_node is not None:
        if nproc_per_node < 1:
            raise InvalidSpec("must be at least 1", "--nproc-per-node")
        return [nproc_per_node] * node_count, "--nproc-per-node"
    uniform = environ.get("SLURM_NTASKS_PER_NODE", "").strip()
    if uniform:
        if not uniform.isdigit() or int(uniform) < 1:
            problem = f"expected a positive number, got {uniform!r}"
            raise InvalidSpec(problem, "SLURM_NTASKS_PER_NODE")
        return [int(uniform)] * node_count, "SLURM_NTASKS_PER_NODE"
    spread = environ.get("SLURM_TASKS_PER_NODE", "").strip()
    if spread:
        try:
            counts = expand_tasks_per_node(spread)
        except ValueError as exc:
            raise InvalidSpec(f"{spread!r}: {exc}", "SLURM_TASKS_PER_NODE") from None
        if len(counts) != node_count or min(counts) < 1:
            raise InvalidSpec(
                f"{spread!r} gives {len(counts)} node(s) but the node list has {node_count} "
                "(pass --nproc-per-node)",
                "SLURM_TASKS_PER_NODE",
            )
        return counts, "SLURM_TASKS_PER_NODE"
    return [1] * node_count, "default"


def detect(
    environ: Mapping[str, str], nproc_per_node: int | None = None, run: Runner = run_command
) -> Allocation | None:
    """The allocation this process runs inside, or None outside Slurm.

    Raises InvalidSpec (naming the variable or command) when the environment says
    Slurm but its node list is missing or malformed, or Slurm's commands fail.
    """
    job = job_id(environ)
    if job is None:
        return None
    if not re.fullmatch(r"[0-9]+(_[0-9]+)?", job):
        raise InvalidSpec(f"expected a Slurm job id, got {job!r}", "SLURM_JOB_ID")
    name, value = nodelist_of(environ)
    check_nodelist(name, value)
    if shutil.which("srun") is None:
        raise InvalidSpec(
            "not found on PATH; inside a Slurm allocation launch starts its agents with srun "
            "(or pass --no-slurm)",
            "srun",
        )
    nodes = [n for n in run(["scontrol", "show", "hostnames", value]).split() if n]
    if not nodes:
        raise InvalidSpec(f"expanded {value!r} to no node", f"scontrol show hostnames ({name})")
    counts, source = tasks_per_node(environ, len(nodes), nproc_per_node)
    return Allocation(
        job_id=job,
        nodelist=value,
        nodes=tuple(nodes),
        addresses=tuple(node_addresses(nodes, value, run)),
        tasks_per_node=tuple(counts),
        tasks_from=source,
    )


#: Job states in which Slurm, not the ranks, ended the job, and what each means.
ENDED_BY_SLURM = {
    "CANCELLED": "by scancel or an administrator",
    "TIMEOUT": "its time limit was reached",
    "PREEMPTED": "preempted by another job",
    "NODE_FAIL": "a node failed",
    "DEADLINE": "its deadline passed",
    "OUT_OF_MEMORY": "out of memory",
    "BOOT_FAIL": "a node failed to boot",
}


def job_state(job: str, run: Runner = run_command) -> str:
    """``scontrol show job``'s JobState (empty when Slurm cannot say; never raises)."""
    try:
        out = run(["scontrol", "show", "job", "-o", job])
    except InvalidSpec:
        return ""
    fields = dict(word.partition("=")[::2] for word in out.split() if "=" in word)
    return fields.get("JobState", "")


def ended_by_slurm(
    job: str, run: Runner = run_command, settle_s: float = COMPLETING_SETTLE_S
) -> str | None:
    """A line saying Slurm ended ``job`` (so a rank's SIGTERM was not its own failure),
    or None when it did not or Slurm cannot say; never raises.

    A job Slurm is ending shows COMPLETING until its last process is gone on every
    node (its final state hides behind that), so that state is read again for up to
    ``settle_s`` seconds; a job still RUNNING is answered at once.
    """
    deadline = time.monotonic() + settle_s
    state = job_state(job, run)
    while state == "COMPLETING" and time.monotonic() < deadline:
        time.sleep(0.1)
        state = job_state(job, run)
    why = ENDED_BY_SLURM.get(state)
    if why is None:
        return None
    return f"Slurm ended job {job} ({state}: {why}); the ranks did not fail on their own"
