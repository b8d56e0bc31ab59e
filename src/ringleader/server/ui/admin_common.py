"""What the admin pages share: who may use them, and reading a form's fields."""

from __future__ import annotations

from typing import Any

from fastapi import Depends
from pydantic import ValidationError

from ringleader.server.models import User
from ringleader.server.services.roles import require_global_admin
from ringleader.server.ui.session import csrf_checked, ui_user

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
        message = error["msg"].removeprefix("Value error, ")
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
