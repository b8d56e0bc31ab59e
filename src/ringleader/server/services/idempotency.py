"""A submission sent again is the first one: the ``Idempotency-Key`` header.

Why: a client whose POST got no answer (a timeout, a connection cut, a server
restarting) cannot tell whether its workload was made.  Sent again with the same
key, by the same user and with the same body, the submission answers as the first
did (202, the same workload id) and makes nothing; the same key with another body
is a 422 naming the header, never a silent second workload or a silent no-op.

Keys are the submitter's own (one user's key never finds another's workload) and
are kept with the workload for as long as its row lives, deleted or not: a key is
not reused for something else.  The unique index on (created_by, idempotency_key)
turns two racing retries into one row; the loser reads the winner's.
"""

from __future__ import annotations

import hashlib
import json
import re

from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.errors import InvalidSpec
from ringleader.server.models import User, Workload
from ringleader.spec import WorkloadSpec

HEADER = "Idempotency-Key"
MAX_KEY_LENGTH = 200
# Visible ASCII: a UUID, a ULID, a client's own counter; no spaces or control characters.
_KEY = re.compile(r"[\x21-\x7e]{1," + str(MAX_KEY_LENGTH) + "}")


def checked_key(value: str | None) -> str | None:
    """The header's value, or the 422 that names it."""
    if value is None:
        return None
    if not _KEY.fullmatch(value):
        raise InvalidSpec(
            f"must be 1 to {MAX_KEY_LENGTH} visible ASCII characters (a UUID, say)", HEADER
        )
    return value


def digest(body: WorkloadSpec) -> str:
    """The body as sent, reduced to a digest a retry's body is compared with."""
    data = body.model_dump(mode="json", by_alias=True, exclude_none=True)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()


def earlier(session: Session, user: User, key: str, body_digest: str) -> Workload | None:
    """The workload this user's submission with ``key`` made before, if any; a 422
    when that submission's body was another."""
    found = session.scalar(
        select(Workload).where(Workload.created_by == user.id, Workload.idempotency_key == key)
    )
    if found is not None and found.request_digest != body_digest:
        raise InvalidSpec(
            f"this key was used for another submission (workload {found.name}, id "
            f"{found.id}); a retry must send the same body, a new submission a new key",
            HEADER,
        )
    return found
