"""Users and their access keys (Run:ai's ``/api/v1/users`` and ``/api/v1/access-keys``).

Nomenclature: a *user* is a person or a service; a *global admin*
(``is_admin``) manages users, projects and nodes; an *access key* (client id
+ secret) is what a user exchanges for bearer tokens.

Invariants:
- only global admins create, list, change and remove users; a user may read
  itself and end its own tokens (logout);
- a user manages its own access keys (at most ``MAX_KEYS``, names unique per
  user); a global admin may also revoke anyone's; another user's key is
  "not found" to everyone else;
- a secret is returned once, by the call that made it, and stored hashed;
  nothing here ever returns or logs it again;
- there is always a global admin: the last one cannot be removed or demoted,
  and nobody removes themselves;
- each write commits, and raises before it changes anything: nothing is
  half-created.
"""

from __future__ import annotations

from sqlalchemy import delete, func, select
from sqlalchemy.orm import Session

from ringleader.errors import Conflict, NotFound
from ringleader.server.auth import create_access_key
from ringleader.server.models import AccessKey, Project, ProjectMember, Token, User, Workload
from ringleader.server.schemas import (
    AccessKeyCreated,
    AccessKeyIn,
    AccessKeyList,
    AccessKeyOut,
    MembershipOut,
    UserCreated,
    UserIn,
    UserOut,
    UserUpdate,
)
from ringleader.server.services.roles import require_global_admin
from ringleader.server.services.workloads import findable

MAX_KEYS = 20  # per user, as Run:ai allows
FIRST_KEY = "default"  # the name of the key a new user is created with


def find_user(session: Session, key: str) -> User:
    """A user by id or username; 404 otherwise."""
    user = None
    if findable(key):
        user = session.get(User, key) or session.scalar(select(User).where(User.name == key))
    if user is None:
        raise NotFound("user", key)
    return user


def _memberships(session: Session, user_ids: list[str] | None) -> dict[str, list[MembershipOut]]:
    """user id -> its projects and roles, in one query (of ``user_ids``; None: everyone's)."""
    query = (
        select(ProjectMember.user_id, Project.id, Project.name, ProjectMember.role)
        .join(Project, Project.id == ProjectMember.project_id)
        .order_by(Project.name)
    )
    if user_ids is not None:
        query = query.where(ProjectMember.user_id.in_(user_ids))
    out: dict[str, list[MembershipOut]] = {}
    for user_id, project_id, name, role in session.execute(query):
        out.setdefault(user_id, []).append(
            MembershipOut(project_id=project_id, project_name=name, role=role)
        )
    return out


def user_out(user: User, memberships: list[MembershipOut]) -> UserOut:
    return UserOut(
        id=user.id,
        username=user.name,
        is_admin=user.is_admin,
        os_user=user.os_user,
        created_at=user.created_at,
        projects=memberships,
    )


def _one(session: Session, user: User) -> UserOut:
    return user_out(user, _memberships(session, [user.id]).get(user.id, []))


def create(session: Session, caller: User, body: UserIn) -> UserCreated:
    """A new user with one access key (its secret in the answer, this once)."""
    require_global_admin(caller, "create users")
    if session.scalar(select(User.id).where(User.name == body.username)) is not None:
        raise Conflict(f"a user named {body.username!r} already exists")
    user = User(name=body.username, is_admin=body.is_admin, os_user=body.os_user)
    session.add(user)
    session.flush()
    key = create_access_key(session, user, name=FIRST_KEY)
    session.commit()
    out = _one(session, user)
    return UserCreated(**out.model_dump(), client_id=key.client_id, client_secret=key.client_secret)


def list_users(session: Session, caller: User) -> list[UserOut]:
    require_global_admin(caller, "list users")
    memberships = _memberships(session, None)
    rows = session.scalars(select(User).order_by(User.name))
    return [user_out(u, memberships.get(u.id, [])) for u in rows]


def get(session: Session, caller: User, key: str) -> UserOut:
    """A user as a global admin sees it, or the caller itself."""
    user = find_user(session, key)
    if user.id != caller.id:
        require_global_admin(caller, "see other users")
    return _one(session, user)


def _other_admins(session: Session, user: User) -> int:
    return (
        session.scalar(
            select(func.count()).select_from(User).where(User.is_admin, User.id != user.id)
        )
        or 0
    )


def update(session: Session, caller: User, key: str, body: UserUpdate) -> UserOut:
    """Change what is given: ``isAdmin``, ``osUser`` (null clears it)."""
    require_global_admin(caller, "change users")
    user = find_user(session, key)
    given = body.model_fields_set
    if "is_admin" in given and body.is_admin is not None:
        if user.is_admin and not body.is_admin and _other_admins(session, user) == 0:
            raise Conflict(f"{user.name!r} is the last admin; make another user admin first")
        user.is_admin = body.is_admin
    if "os_user" in given:
        user.os_user = body.os_user
    session.commit()
    return _one(session, user)


def remove(session: Session, caller: User, key: str) -> None:
    """Delete a user: its memberships, keys and tokens go with it (ON DELETE
    CASCADE); its workloads stay, their ``createdBy`` emptied."""
    require_global_admin(caller, "delete users")
    user = find_user(session, key)
    if user.id == caller.id:
        raise Conflict("you cannot delete yourself; another admin can")
    if user.is_admin and _other_admins(session, user) == 0:
        raise Conflict(f"{user.name!r} is the last admin")
    # Their workloads' rows first, in id order, then the user's (whose delete empties
    # their createdBy): the order a background write takes them in (``pipeline.act``
    # locks a workload, then its pod token's insert checks the user). Taken the other
    # way round, the two deadlocked on PostgreSQL.
    session.execute(
        select(Workload.id)
        .where(Workload.created_by == user.id)
        .order_by(Workload.id)
        .with_for_update()
    ).all()
    session.delete(user)
    session.commit()


def logout(session: Session, caller: User, key: str) -> None:
    """End every token of a user (the caller itself, or anyone for a global admin);
    its access keys stay valid for new tokens."""
    user = find_user(session, key)
    if user.id != caller.id:
        require_global_admin(caller, "log other users out")
    session.execute(delete(Token).where(Token.user_id == user.id))
    session.commit()


# ----- access keys -------------------------------------------------------------


def key_out(row: AccessKey) -> AccessKeyOut:
    return AccessKeyOut(
        id=row.id,
        name=row.name,
        client_id=row.client_id,
        created_at=row.created_at,
        last_login=row.last_used_at,
    )


def create_key(session: Session, caller: User, body: AccessKeyIn) -> AccessKeyCreated:
    """A new access key of the caller's; the only answer that holds its secret."""
    names = list(session.scalars(select(AccessKey.name).where(AccessKey.user_id == caller.id)))
    if body.name in names:
        raise Conflict(f"you already have an access key named {body.name!r}")
    if len(names) >= MAX_KEYS:
        raise Conflict(f"you have {len(names)} access keys, the most allowed; revoke one first")
    key = create_access_key(session, caller, name=body.name)
    session.commit()
    return AccessKeyCreated(**key_out(key.row).model_dump(), client_secret=key.client_secret)


def list_keys(session: Session, caller: User) -> AccessKeyList:
    rows = session.scalars(
        select(AccessKey).where(AccessKey.user_id == caller.id).order_by(AccessKey.created_at)
    )
    return AccessKeyList(access_keys=[key_out(row) for row in rows])


def _key(session: Session, caller: User, key_id: str) -> AccessKey:
    """The caller's key by id or client id (any user's for a global admin); 404 otherwise."""
    row = None
    if findable(key_id):
        row = session.get(AccessKey, key_id) or session.scalar(
            select(AccessKey).where(AccessKey.client_id == key_id)
        )
    if row is None or (row.user_id != caller.id and not caller.is_admin):
        raise NotFound("access key", key_id)
    return row


def get_key(session: Session, caller: User, key_id: str) -> AccessKeyOut:
    return key_out(_key(session, caller, key_id))


def revoke_key(session: Session, caller: User, key_id: str) -> None:
    """Delete a key: no new tokens for it, and its tokens end (ON DELETE CASCADE)."""
    row = _key(session, caller, key_id)
    session.delete(row)
    session.commit()
