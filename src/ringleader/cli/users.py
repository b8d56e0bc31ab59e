"""``user create|list|delete|assign|unassign|logout`` and ``access-key create|list|revoke``.

Everything goes through the typed client. A secret is printed once, by the
command that made it (``user create``, ``access-key create``), and never
again: the server keeps only its hash.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.table import Table

from ringleader.cli.common import age, client, console, err_console, reports_errors
from ringleader.errors import InvalidSpec

if TYPE_CHECKING:
    from pydantic import BaseModel

ROLE_HELP = "Role in the project: admin (manages members), researcher (runs), viewer (reads)."

user_app = typer.Typer(
    help="Users and their project roles (admins; project admins assign members).\n\n"
    "Example: ringleader user create alice --os-user alice",
    no_args_is_help=True,
)
access_key_app = typer.Typer(
    help="Your access keys: create (the secret is shown once), list, revoke.\n\n"
    "Example: ringleader access-key create ci",
    no_args_is_help=True,
)


def _build(model: type[BaseModel], flags: dict[str, str], **values: object) -> BaseModel:
    """``model`` from ``values``; a bad value is an InvalidSpec naming its flag."""
    from pydantic import ValidationError

    try:
        return model.model_validate(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = str(first["loc"][0]) if first["loc"] else ""
        raise InvalidSpec(str(first["msg"]), flags.get(field, field)) from None


def _print_secret(client_id: str, secret: str) -> None:
    console.print(f"Client ID:     {client_id}")
    console.print(f"Client secret: {secret}")
    err_console.print(
        "Store the secret now: it is shown this once (the server keeps only its hash). "
        "Log in with: ringleader login --client-id ID --client-secret SECRET"
    )


@user_app.command("create")
@reports_errors
def user_create(
    name: str = typer.Argument(..., metavar="NAME", help="User name (letters, digits, . _ @ + -)."),
    admin: bool = typer.Option(False, "--admin", help="A global admin: users, projects, nodes."),
    os_user: str = typer.Option(
        None, "--os-user", metavar="ACCOUNT", help="The OS account its workloads will run as."
    ),
) -> None:
    """Create a user with its first access key (the secret is printed once).

    Example: ringleader user create alice --os-user alice
    """
    from ringleader.server.schemas import UserIn

    body = _build(
        UserIn,
        {"username": "NAME", "os_user": "--os-user", "osUser": "--os-user"},
        username=name,
        is_admin=admin,
        os_user=os_user,
    )
    created = client().create_user(body)  # type: ignore[arg-type]
    console.print(f"User '{created.username}' created (id {created.id})")
    _print_secret(created.client_id, created.client_secret)


@user_app.command("list")
@reports_errors
def user_list() -> None:
    """List users with their projects and roles (admins).

    Example: ringleader user list
    """
    table = Table("USER", "ID", "ADMIN", "OS USER", "PROJECTS (ROLE)", "AGE", box=None)
    for u in client().users():
        projects = ", ".join(f"{p.project_name} ({p.role})" for p in u.projects) or "-"
        table.add_row(
            u.username, u.id, "yes" if u.is_admin else "", u.os_user or "-", projects,
            age(u.created_at),
        )  # fmt: skip
    console.print(table)


@user_app.command("update")
@reports_errors
def user_update(
    name: str = typer.Argument(..., metavar="NAME", help="User name or id."),
    admin: bool = typer.Option(None, "--admin/--no-admin", help="Make or unmake a global admin."),
    os_user: str = typer.Option(
        None, "--os-user", metavar="ACCOUNT", help="The OS account its workloads run as."
    ),
    clear_os_user: bool = typer.Option(False, "--clear-os-user", help="Forget the OS account."),
) -> None:
    """Change a user: global admin or not, its OS account (admins).

    Example: ringleader user update alice --os-user alice2
    """
    from ringleader.server.schemas import UserUpdate

    values: dict[str, object] = {}
    if admin is not None:
        values["is_admin"] = admin
    if os_user is not None or clear_os_user:
        values["os_user"] = None if clear_os_user else os_user
    if not values:
        raise InvalidSpec("nothing to change: give --admin/--no-admin or --os-user", "OPTIONS")
    change = _build(UserUpdate, {"os_user": "--os-user", "osUser": "--os-user"}, **values)
    u = client().update_user(name, change)  # type: ignore[arg-type]
    console.print(
        f"User '{u.username}': admin {'yes' if u.is_admin else 'no'}, OS user {u.os_user or '-'}"
    )


@user_app.command("delete")
@reports_errors
def user_delete(name: str = typer.Argument(..., metavar="NAME", help="User name or id.")) -> None:
    """Delete a user: its memberships, access keys and tokens go too; its workloads stay.

    Example: ringleader user delete alice
    """
    client().delete_user(name)
    console.print(f"User '{name}' deleted")


@user_app.command("assign")
@reports_errors
def user_assign(
    name: str = typer.Argument(..., metavar="NAME", help="User name or id."),
    project: str = typer.Argument(..., metavar="PROJECT", help="Project name or id."),
    role: str = typer.Option("researcher", "--role", "-r", metavar="ROLE", help=ROLE_HELP),
) -> None:
    """Make a user a member of a project with a role, or change its role.

    Example: ringleader user assign alice team-a --role viewer
    """
    from ringleader.server.schemas import MemberIn

    _build(MemberIn, {"role": "--role"}, role=role)
    member = client().set_member(project, name, role)
    console.print(f"User '{member.username}' is {member.role} in project '{project}'")


@user_app.command("unassign")
@reports_errors
def user_unassign(
    name: str = typer.Argument(..., metavar="NAME", help="User name or id."),
    project: str = typer.Argument(..., metavar="PROJECT", help="Project name or id."),
) -> None:
    """Take a user out of a project (its workloads there stay).

    Example: ringleader user unassign alice team-a
    """
    client().remove_member(project, name)
    console.print(f"User '{name}' removed from project '{project}'")


@user_app.command("logout")
@reports_errors
def user_logout(
    name: str = typer.Argument(..., metavar="NAME", help="User name or id (yours: any user)."),
) -> None:
    """End every token of a user at once; its access keys stay valid.

    Example: ringleader user logout alice
    """
    client().logout_user(name)
    console.print(f"Every token of '{name}' is revoked")


@access_key_app.command("create")
@reports_errors
def key_create(
    name: str = typer.Argument(
        ..., metavar="NAME", help="Key name: lowercase letters, digits, - and _."
    ),
) -> None:
    """Create an access key of yours (the secret is printed once).

    Example: ringleader access-key create ci
    """
    from ringleader.server.schemas import AccessKeyIn

    _build(AccessKeyIn, {"name": "NAME"}, name=name)
    key = client().create_access_key(name)
    console.print(f"Access key '{key.name}' created (id {key.id})")
    _print_secret(key.client_id, key.client_secret)


@access_key_app.command("list")
@reports_errors
def key_list() -> None:
    """List your access keys (never their secrets).

    Example: ringleader access-key list
    """
    table = Table("NAME", "ID", "CLIENT ID", "AGE", "LAST USED", box=None)
    for k in client().access_keys():
        last = f"{age(k.last_login)} ago" if k.last_login else "never"
        table.add_row(k.name or "-", k.id, k.client_id, age(k.created_at), last)
    console.print(table)


@access_key_app.command("revoke")
@reports_errors
def key_revoke(
    key: str = typer.Argument(..., metavar="KEY", help="The key's name, id or client id."),
) -> None:
    """Revoke an access key: it gives no more tokens, and the tokens it gave end now.

    Example: ringleader access-key revoke ci
    """
    c = client()
    named = [k.id for k in c.access_keys() if k.name == key]
    c.revoke_access_key(named[0] if named else key)
    console.print(f"Access key '{key}' revoked")
