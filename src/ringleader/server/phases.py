"""One door for status: every phase change of a workload or pod goes through here.

Nomenclature (Run:ai's phase names, plain strings):
- workload phases: Creating, Pending, Initializing, Running, Degraded,
  Completed, Failed, Stopping, Stopped, Deleting, Deleted, Resuming, Unknown;
- pod phases: Pending, Running, Succeeded, Failed, Stopped, Unknown;
- *transition*: a move from the current phase to another, allowed only if the
  tables below list it; *event*: the history row each transition writes.

Invariants:
- ``transition``, ``transition_pod`` and ``restart_pod`` are the only writers
  of ``phase``; ``observe`` is how a backend's report reaches them (the door,
  not its caller, decides what an observed phase means); ``end_attempt``,
  ``count_attempts`` and ``note_pending`` are the only writers of the attempt
  counter and of a phase's reason outside a transition.  Each change checks
  the table, stamps the times and adds exactly one event row; a disallowed
  change raises ``IllegalTransition`` and changes nothing; a change to the
  current phase is a no-op (no event), so background passes can repeat
  themselves harmlessly.
- Nothing here commits or flushes: the caller owns the transaction, so the
  phase, the timestamps and the event are saved together or not at all.
  Concurrent writers of one workload should load it with
  ``select(...).with_for_update()`` on PostgreSQL (SQLite transactions are
  already serialised, see ``db``).
- Time comes from the ``now`` argument when given (tests inject a clock),
  else ``db.utcnow()``; it must be aware.
- A finished pod never changes phase again; a new attempt resets it
  explicitly with ``restart_pod``, which says so in an event.
- ``Workload.running_pods`` is the number of its pods in phase Running: the
  writers of pod phases here keep it (``_count_running``) so the workload list
  can sort by it through an index.
- Every reason, message and pod name written here is ``storable``: a tenant
  writes much of it (an error file's text, a rank's last lines, an exit
  message), and PostgreSQL refuses NUL in text and more than 255 characters in
  a reason, which would fail the loop's whole transaction, every pass.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ColumnElement, inspect
from sqlalchemy.orm import Session

from ringleader.errors import RingleaderError
from ringleader.server.auth import revoke_pod_tokens
from ringleader.server.db import utcnow
from ringleader.server.models import NAME_LENGTH, Event, Pod, Workload
from ringleader.textbounds import replace_unstorable

WORKLOAD_TRANSITIONS: dict[str, frozenset[str]] = {
    "Creating": frozenset({"Pending", "Failed", "Deleting"}),
    "Pending": frozenset(
        {"Initializing", "Running", "Completed", "Failed", "Stopping", "Deleting"}
    ),
    "Initializing": frozenset(
        {"Running", "Completed", "Failed", "Stopping", "Deleting", "Pending", "Unknown"}
    ),
    "Running": frozenset(
        {"Completed", "Failed", "Degraded", "Stopping", "Deleting", "Pending", "Unknown"}
    ),
    "Degraded": frozenset(
        {"Running", "Completed", "Failed", "Stopping", "Deleting", "Pending", "Unknown"}
    ),
    "Stopping": frozenset({"Stopped", "Failed", "Deleting"}),
    "Stopped": frozenset({"Resuming", "Deleting"}),
    "Resuming": frozenset({"Pending", "Failed", "Stopped", "Deleting"}),
    "Completed": frozenset({"Deleting"}),
    "Failed": frozenset({"Deleting", "Resuming"}),
    "Unknown": frozenset(
        {"Pending", "Initializing", "Running", "Completed", "Failed", "Stopping", "Deleting"}
    ),
    "Deleting": frozenset({"Deleted"}),
    "Deleted": frozenset(),
}
WORKLOAD_PHASES: tuple[str, ...] = tuple(WORKLOAD_TRANSITIONS)
UNKNOWN = "Unknown"
# Phases that end a run: entering one stamps completed_at.
WORKLOAD_ENDED: frozenset[str] = frozenset({"Completed", "Failed", "Stopped", "Deleted"})
# The groups the services, the scheduler's snapshot and the background work act on.
FINAL = ("Completed", "Failed", "Stopped")  # a run ended; the user may resume or delete it
ACTIVE = ("Creating", "Pending", "Initializing", "Running", "Degraded", "Resuming", "Unknown")
POLLED = ("Initializing", "Running", "Degraded", "Unknown")  # the backend says how it goes
STOPPING = ("Stopping", "Deleting")  # the backend is asked to stop it
# Admitted and not ended, or being stopped: its bound pods hold their resources.
HOLDING = (*POLLED, *STOPPING)
LINGERING = ("Completed", "Failed")  # ended, but cleanPodPolicy None may leave pods running

POD_TRANSITIONS: dict[str, frozenset[str]] = {
    "Pending": frozenset({"Running", "Succeeded", "Failed", "Stopped", "Unknown"}),
    "Running": frozenset({"Succeeded", "Failed", "Stopped", "Unknown"}),
    "Unknown": frozenset({"Pending", "Running", "Succeeded", "Failed", "Stopped"}),
    "Succeeded": frozenset(),
    "Failed": frozenset(),
    "Stopped": frozenset(),
}
POD_PHASES: tuple[str, ...] = tuple(POD_TRANSITIONS)
POD_ENDED: frozenset[str] = frozenset({"Succeeded", "Failed", "Stopped"})
POD_LIVE = ("Pending", "Running", "Unknown")  # what a stop or a preemption stops
# What a backend observed that is no allowed move from the current phase, and what
# the door makes of it instead.  A workload is stopped only through Stopping (the
# user's suspend), so a backend that reports Stopped for a running one saw it
# stopped from outside (its supervisor signalled): that run has failed.
OBSERVED_INSTEAD: dict[tuple[str, str], tuple[str, str, str]] = {
    (current, "Stopped"): (
        "Failed",
        "StoppedOutside",
        "the backend reports the workload stopped, but nobody asked ringleader to stop it "
        "(its processes were signalled from outside?)",
    )
    for current in POLLED
}


# A phase's or event's message: a root cause with its traceback fits; more is cut.
MESSAGE_CHARS = 16_000
#: Phases whose reason says why the workload waits (note_pending keeps it current).
WAITING_WITH_REASON = frozenset({"Pending", "Initializing"})
REASON_CHARS = NAME_LENGTH  # reasons and pod names are VARCHAR(255) columns
TYPE_CHARS = 64  # an event's type (note_pending's is its reason): VARCHAR(64)
ELLIPSIS = "\u2026"


def storable(text: str, max_chars: int = MESSAGE_CHARS) -> str:
    """``text`` as any database holds it: NUL and lone surrogates become U+FFFD (the
    replacement character, so a reader sees something was there), and text longer
    than ``max_chars`` keeps its start and ends with an ellipsis.  Control
    characters stay: they are data here; whoever prints them makes them safe."""
    text = replace_unstorable(text)  # NUL (PostgreSQL text), lone surrogates (UTF-8)
    if len(text) > max_chars:
        text = text[: max_chars - len(ELLIPSIS)] + ELLIPSIS
    return text


class IllegalTransition(RingleaderError):
    """A phase change the transition table does not allow (a bug or a race, never input)."""

    def __init__(self, from_phase: str, to_phase: str, what: str) -> None:
        self.from_phase = from_phase
        self.to_phase = to_phase
        self.what = what
        super().__init__(f"{what}: illegal phase change {from_phase} -> {to_phase}")


def _now(now: datetime | None) -> datetime:
    if now is None:
        return utcnow()
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError(f"naive datetime {now!r}: pass an aware UTC time")
    return now


def _check(table: dict[str, frozenset[str]], current: str, to_phase: str, what: str) -> None:
    if to_phase not in table.get(current, frozenset()):
        raise IllegalTransition(current, to_phase, what)


def transition(
    session: Session,
    workload: Workload,
    to_phase: str,
    *,
    reason: str = "",
    message: str = "",
    now: datetime | None = None,
) -> bool:
    """Move ``workload`` to ``to_phase``; False if it is already there (nothing written).

    Stamps ``updated_at``; ``started_at`` on the first Running; ``completed_at``
    when a run ends (Completed/Failed/Stopped, or Deleted if it never ended),
    cleared on Resuming so the next end is stamped; ``deleted_at`` on Deleted
    if the service has not set it already.
    """
    current = workload.phase
    if current == to_phase:
        return False
    _check(WORKLOAD_TRANSITIONS, current, to_phase, f"workload {workload.name!r} ({workload.id})")
    at = _now(now)
    reason, message = storable(reason, REASON_CHARS), storable(message)
    workload.phase = to_phase
    workload.phase_reason = reason
    workload.phase_message = message
    workload.updated_at = at
    if to_phase == "Running" and workload.started_at is None:
        workload.started_at = at
    if to_phase == "Resuming":
        workload.completed_at = None
    if to_phase in WORKLOAD_ENDED and workload.completed_at is None:
        workload.completed_at = at
    if to_phase in WORKLOAD_ENDED:  # its pods' token (auth.issue_pod_token) ends with it
        revoke_pod_tokens(session, workload.id)
    if to_phase == "Deleted" and workload.deleted_at is None:
        workload.deleted_at = at
    _add_event(
        session,
        workload,
        "PhaseChanged",
        at,
        from_phase=current,
        to_phase=to_phase,
        reason=reason,
        message=message,
    )
    return True


def transition_pod(
    session: Session,
    pod: Pod,
    to_phase: str,
    *,
    exit_code: int | None = None,
    reason: str = "",
    message: str = "",
    now: datetime | None = None,
) -> bool:
    """Move ``pod`` to ``to_phase``; False if it is already there (nothing written).

    Stamps ``updated_at``; ``started_at`` on the first Running; ``completed_at``
    on Succeeded/Failed/Stopped; records ``exit_code`` when given.
    """
    current = pod.phase
    if current == to_phase:
        return False
    _check(POD_TRANSITIONS, current, to_phase, f"pod {pod.name!r} of workload {pod.workload_id}")
    at = _now(now)
    _count_running(pod, current, to_phase)
    pod.phase = to_phase
    pod.updated_at = at
    if exit_code is not None:
        pod.exit_code = exit_code
    if to_phase == "Running" and pod.started_at is None:
        pod.started_at = at
    if to_phase in POD_ENDED:
        pod.completed_at = at
    if exit_code is not None and not message:
        message = f"exit code {exit_code}"
    _add_event(
        session,
        pod.workload,
        "PodPhaseChanged",
        at,
        from_phase=current,
        to_phase=to_phase,
        reason=reason,
        message=message,
        pod_name=pod.name,
    )
    return True


def restart_pod(
    session: Session,
    pod: Pod,
    *,
    attempt: int,
    reason: str = "",
    message: str = "",
    now: datetime | None = None,
    keep_binding: bool = False,
) -> None:
    """Reset ``pod`` to Pending for a new ``attempt`` of its gang (the one way out of an end).

    Clears exit code and times of the previous attempt, and the node and GPUs
    unless ``keep_binding`` (a gang restarted by its backend in place keeps
    the scheduler's binding; a preempted or resumed one is placed afresh).
    The event (type "PodRestarted") keeps the old phase for the history.
    """
    at = _now(now)
    previous = pod.phase
    _count_running(pod, previous, "Pending")
    pod.phase = "Pending"
    pod.attempt = attempt
    pod.exit_code = None
    if not keep_binding:
        pod.node, pod.gpus = "", []
    pod.started_at = None
    pod.completed_at = None
    pod.updated_at = at
    message = message or f"attempt {attempt}"
    _add_event(
        session,
        pod.workload,
        "PodRestarted",
        at,
        from_phase=previous,
        to_phase="Pending",
        reason=reason,
        message=message,
        pod_name=pod.name,
    )


def _count_running(pod: Pod, before: str, after: str) -> None:
    """Keep ``running_pods`` of ``pod``'s workload equal to its Running pods.

    Why stored: counting the pods of every row to sort 10,000 workloads took
    most of the page's 50 ms budget; this column has an index.  Written as an
    SQL increment (``running_pods + 1``), composed when several pods change
    before one flush, so a concurrent writer's change is never lost; a workload
    not yet in the database counts in Python."""
    delta = (after == "Running") - (before == "Running")
    workload = pod.workload
    if not delta or workload is None:
        return
    if not inspect(workload).has_identity:
        workload.running_pods = (workload.running_pods or 0) + delta
        return
    pending = workload.__dict__.get("running_pods")  # no load: an expression or a value
    base = pending if isinstance(pending, ColumnElement) else Workload.running_pods
    workload.running_pods = base + delta  # type: ignore[assignment]


def record_event(
    session: Session,
    workload: Workload,
    type: str,
    reason: str = "",
    message: str = "",
    pod_name: str | None = None,
    now: datetime | None = None,
) -> Event:
    """Add a non-phase event (Submitted, Preempted, ...) to ``workload``'s history."""
    return _add_event(
        session, workload, type, _now(now), reason=reason, message=message, pod_name=pod_name
    )


def _add_event(
    session: Session,
    workload: Workload,
    type: str,
    at: datetime,
    *,
    from_phase: str | None = None,
    to_phase: str | None = None,
    reason: str = "",
    message: str = "",
    pod_name: str | None = None,
) -> Event:
    event = Event(
        workload=workload,
        time=at,
        type=storable(type, TYPE_CHARS),
        from_phase=from_phase,
        to_phase=to_phase,
        reason=storable(reason, REASON_CHARS),
        message=storable(message),
        pod_name=None if pod_name is None else storable(pod_name, REASON_CHARS),
    )
    session.add(event)
    return event


def observe(
    session: Session,
    workload: Workload,
    observed: str,
    *,
    message: str = "",
    now: datetime | None = None,
) -> bool:
    """A backend's report of ``workload``'s phase, unfiltered: the door decides
    (``observed_move``).  False when nothing was written."""
    move = observed_move(workload.phase, observed)
    if move is None:
        return False
    to_phase, reason, why = move
    text = (f"{why}: {message}" if message else why) if why else message
    return transition(session, workload, to_phase, reason=reason, message=text, now=now)


def observed_move(current: str, observed: str) -> tuple[str, str, str] | None:
    """What a backend's report ``observed`` makes of a workload in ``current``: the
    phase, reason and why (prefixed to the backend's message; "" for none), or None
    for no change.  An allowed move is made as reported (reason: the observed
    phase); a report that is no allowed move is mapped by ``OBSERVED_INSTEAD`` when
    it names one, and otherwise changes nothing (a lingering Completed workload
    whose backend still says Running, say).  Pure: the reconciler's dry run is this."""
    if observed == current:
        return None
    if observed in WORKLOAD_TRANSITIONS.get(current, frozenset()):
        return observed, observed, ""
    return OBSERVED_INSTEAD.get((current, observed))


def count_attempts(workload: Workload, attempt: int) -> None:
    """The backend restarted the gang in place: its attempt counter only grows."""
    workload.attempt = max(workload.attempt, attempt)


def end_attempt(
    session: Session,
    workload: Workload,
    reason: str,
    cause: str,
    backoff_limit: int,
    *,
    restart: bool = True,
) -> None:
    """An attempt ended whose restart is the server's (the scheduler places the gang
    again): back to Pending with the next attempt, or Failed once ``backoff_limit``
    restarts are spent, or at once where a restart would meet the same (``restart``
    False: its image cannot be pulled).  ``reason``: one line, then the root-cause text."""
    first, _, rest = reason.partition("\n")
    if not restart:
        message = f"{first}; not restarted: a restart would meet the same" + (rest and f"\n{rest}")
        transition(session, workload, "Failed", reason=cause, message=message)
    elif workload.attempt < backoff_limit:
        workload.attempt += 1
        message = (
            f"{first}; restarting on the nodes that answer "
            f"(attempt {workload.attempt + 1} of {backoff_limit + 1})"
        )
        transition(session, workload, "Pending", reason=cause, message=message)
    else:
        message = f"{first}; no restarts left (backoffLimit {backoff_limit})" + (
            rest and f"\n{rest}"
        )
        transition(session, workload, "Failed", reason=cause, message=message)


def note_pending(session: Session, workload: Workload, reason: str, message: str) -> None:
    """Why a Pending workload waits (or an Initializing one, placed and queued by its
    engine: Slurm's reason).  The message is kept current (its counts change); an
    event marks only the first time for a reason."""
    if workload.phase not in WAITING_WITH_REASON:
        return
    reason, message = storable(reason, REASON_CHARS), storable(message)
    if workload.phase_reason != reason:
        record_event(session, workload, reason, reason=reason, message=message)
    workload.phase_reason, workload.phase_message = reason, message
