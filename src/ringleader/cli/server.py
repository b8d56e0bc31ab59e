"""``ringleader server``: the control plane (API, loops, local backend)."""

from __future__ import annotations

import typer

from ringleader.server.config import DEFAULT_PORT, ServerConfig, home_dir


def server(
    host: str = typer.Option(
        "127.0.0.1", "--host", help="Address to listen on (default: this machine only)."
    ),
    port: int = typer.Option(DEFAULT_PORT, "--port", help="Port to listen on."),
    data_dir: str = typer.Option(
        None, "--data-dir", help="State directory (default $RINGLEADER_HOME or ~/.ringleader)."
    ),
) -> None:
    """Run the control plane: REST API, scheduler and reconcile loops, local backend.

    SQLite under the data directory by default; PostgreSQL with
    RINGLEADER_DATABASE_URL=postgresql+psycopg://user@host/db.

    Examples:

      ringleader server

      ringleader server --host 0.0.0.0 --port 8470
    """
    from pathlib import Path

    import uvicorn

    from ringleader.server.app import create_app

    config = ServerConfig(data_dir=Path(data_dir) if data_dir else home_dir(), host=host, port=port)
    uvicorn.run(create_app(config), host=host, port=port, log_level="warning")
