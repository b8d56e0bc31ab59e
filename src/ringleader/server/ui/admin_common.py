"""What the admin pages share: who may use them, and reading a form's fields."""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from ringleader.server.accounts import RUN_AS_USER, account_name, mapped_name
from ringleader.server.config import ServerConfig
from ringleader.server.models import Project, User
from ringleader.server.services.roles import require_global_admin
from ringleader.server.ui.session import csrf_checked, ui_user
from ringleader.server.ui.wizard_form import friendly

ROLES = ("researcher", "admin", "viewer")
MAX_FIELD = 255  # characters of any one form field read


def admin_user(user: User = Depends(ui_user)) -> User:
    """The logged-in user, if a global admin (else a 403 page)."""
    require_global_admin(user, "open the admin pages")
    return user


def admin_form(user: User = Depends(csrf_checked)) -> User:
    """``csrf_checked`` (the token first: a forged POST learns nothing), then admin only."""
    require_global_admin(user, "change users and access keys")
    return user


def field(form: Any, name: str, errors: dict[str, str], limit: int = MAX_FIELD) -> str:
    """A form field's text, stripped; too long: an error for the field, and ""."""
    value = form.get(name)
    text = value.strip() if isinstance(value, str) else ""
    if len(text) > limit:
        errors[name] = f"at most {limit} characters"
        return ""
    return text


def pydantic_errors(exc: ValidationError, names: dict[str, str]) -> dict[str, str]:
    """The model's complaints by form field (``names``: model field -> form field)."""
    out: dict[str, str] = {}
    for error in exc.errors():
        where = str(error["loc"][0]) if error["loc"] else ""
        message = friendly(error["msg"])
        if error["type"] == "string_too_short" and not error.get("input"):
            message = "a name is required" if where in ("name", "username") else "required"
        if error["type"] == "string_pattern_mismatch":
            message = "letters, digits and . _ @ + - only, starting with a letter or digit"
            if where in ("osUser", "os_user"):
                message = "a POSIX user name: lower-case letters, digits, _ and -"
            if where == "name":
                message = (
                    "lower-case letters, digits, - and _, starting with a letter "
                    "and ending with a letter or digit"
                )
        out.setdefault(names.get(where, where), message)
    return out


def runs_as(config: ServerConfig, target: User) -> str:
    """Which OS account ``target``'s workloads run as, in words (the "OS user" fact): the
    user's own ``osUser``, else the account mapped from the name, unless the server runs
    every workload as one account (``--run-as``)."""
    own = target.os_user or "none"
    fixed = account_name(config.run_as)
    if fixed is not None:
        return f"{own} (not used: every workload runs as {fixed}, --run-as account:{fixed})"
    if config.run_as != RUN_AS_USER:
        return f"{own} (not used: every workload runs as the server's account, --run-as server)"
    if target.os_user:
        return f"{target.os_user}: this user's workloads run as this existing account"
    mapped = mapped_name(target.username, config.run_as_template)
    return (
        f"none: this user's workloads run as {mapped}, an account named after the user "
        f"(--run-as-template {config.run_as_template}), created on first use"
    )


def project_names(s: Session) -> list[tuple[str, str]]:
    """(id, name) of every project, by name: the project selects of the admin pages."""
    return list(s.execute(select(Project.id, Project.name).order_by(Project.name)).all())
