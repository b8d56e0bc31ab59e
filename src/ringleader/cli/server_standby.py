"""``ringleader server``'s options for a standby (``server/ha``): ``--db``, ``--ha``,
``--advertise-url``, ``--lease-ttl``, and their check (exit 2 naming the option)."""

from __future__ import annotations

from typing import Annotated

import typer

from ringleader.server.config import ServerConfig

HA_PANEL = "Standby (PostgreSQL)"

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        metavar="URL",
        help="Database URL (default $RINGLEADER_DATABASE_URL, else SQLite in the data directory).",
    ),
]
HaOption = Annotated[
    bool | None,
    typer.Option(
        "--ha/--no-ha",
        help="Elect one active server through the database; others are standbys "
        "(default: on with PostgreSQL; SQLite has none).",
        rich_help_panel=HA_PANEL,
        show_default=False,
    ),
]
AdvertiseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--advertise-url",
        metavar="URL",
        help="Where clients reach this server, as a standby names it.",
        rich_help_panel=HA_PANEL,
    ),
]
LeaseTtlOption = Annotated[
    float,
    typer.Option(
        "--lease-ttl",
        metavar="SECONDS",
        min=0.5,
        help="A standby takes over once the active has not renewed for this long.",
        rich_help_panel=HA_PANEL,
    ),
]


def with_standby(
    config: ServerConfig,
    *,
    db: str | None,
    ha: bool | None,
    advertise_url: str | None,
    lease_ttl: float,
) -> ServerConfig:
    """``--db`` and the standby's options checked (exit 2 naming the option) into
    ``config``: a standby needs PostgreSQL (``server/ha``)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from ringleader.errors import InvalidSpec
    from ringleader.server.ha import setup

    url = db or config.resolved_database_url()
    try:
        backend = make_url(url).get_backend_name()
    except ArgumentError:
        backend = ""
    if backend not in ("sqlite", "postgresql"):
        where = "--db" if db else "RINGLEADER_DATABASE_URL"
        typer.echo(f"error: {where}: {url!r} is not a sqlite:/// or postgresql+psycopg:// URL",
                   err=True)  # fmt: skip
        raise typer.Exit(2)
    try:
        setup.check(ha, url)
    except InvalidSpec as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if advertise_url is not None and not advertise_url.startswith(("http://", "https://")):
        typer.echo(f"error: --advertise-url: {advertise_url!r} is not an http:// or https:// URL",
                   err=True)  # fmt: skip
        raise typer.Exit(2)
    config.database_url = url if db else config.database_url
    config.ha = ha
    config.advertise_url = advertise_url.rstrip("/") if advertise_url else None
    config.lease_ttl_s = lease_ttl
    config.lease_renew_s = lease_ttl / 3  # two renewals may fail before the lease lapses
    return config
