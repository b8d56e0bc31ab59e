"""Record a rank's fatal exception in a JSON error file, the way torch.elastic does (torch-free).

The launcher gives each rank a path in ``TORCHELASTIC_ERROR_FILE`` (and the same
path in ``RINGLEADER_ERROR_FILE``).  When a rank dies of an uncaught exception it
writes there, and the launcher reads the file to report *which* rank failed and
*why* instead of a bare exit code.  The format is byte-for-byte the one written by
``torch.distributed.elastic.multiprocessing.errors.record`` (see its
``ErrorHandler.record_exception``) so torchrun and ringleader read each other's files::

    {"message": {"message": "<ExcType>: <msg>",
                 "extraInfo": {"py_callstack": "<traceback text>",
                               "timestamp": "<int seconds, as a string>"}}}

torch also writes ``{"message": "<text>", "timestamp": <int>}`` and may add an
``errorCode`` next to ``extraInfo``; :func:`read_error_file` accepts all of them.

Invariants: recording never replaces the original exception (a failed write only
warns), the process still exits non-zero with the traceback on stderr, and one
exception is written at most once even when both :func:`record` and the
``sys.excepthook`` installed by :func:`install_error_recorder` see it.  This module
must not import torch: the launcher imports it to read the files.
"""

from __future__ import annotations

import contextlib
import faulthandler
import functools
import json
import os
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import Any, ParamSpec, TypeVar

__all__ = [
    "error_file_path",
    "install_error_recorder",
    "read_error_file",
    "record",
    "write_error_file",
]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_RECORDED = "_ringleader_error_recorded"
_installed_hook: Callable[..., Any] | None = None


def error_file_path(environ: Mapping[str, str] | None = None) -> str | None:
    """Where this rank's error file goes; torch's name first, as torch's own handler reads it."""
    environ = os.environ if environ is None else environ
    return environ.get("TORCHELASTIC_ERROR_FILE") or environ.get("RINGLEADER_ERROR_FILE") or None


def write_error_file(exc: BaseException, path: str | None = None) -> str | None:
    """Write ``exc`` in torch's format to ``path`` (default: from the env); return the path.

    The write goes through a temporary file and a rename so that a launcher polling
    the path never reads half a JSON document.
    """
    path = path or error_file_path()
    if not path or getattr(exc, _RECORDED, False):
        return None
    data = {
        "message": {
            "message": f"{type(exc).__name__}: {exc}",
            "extraInfo": {
                "py_callstack": "".join(
                    traceback.format_exception(type(exc), exc, exc.__traceback__)
                ),
                "timestamp": str(int(time.time())),
            },
        }
    }
    try:
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".error-", suffix=".json", dir=directory)
        with os.fdopen(fd, "w") as fp:
            json.dump(data, fp)
        os.chmod(tmp, 0o644)  # what torch's plain open() would give; mkstemp says 0600
        os.replace(tmp, path)
    except OSError as err:
        warnings.warn(f"ringleader: could not write error file {path}: {err}", stacklevel=2)
        return None
    with contextlib.suppress(AttributeError, TypeError):
        setattr(exc, _RECORDED, True)
    return path


def record(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Decorate a rank's entry point so an exception escaping it is written to the error file.

    Like torch's ``@record``: ``SystemExit`` and ``KeyboardInterrupt`` pass through
    unrecorded, everything else is recorded and re-raised unchanged.
    """

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        _enable_faulthandler()
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            write_error_file(exc)
            raise

    return wrapper


def _enable_faulthandler() -> None:
    """Dump all threads' stacks on a hard crash (SIGSEGV...), where no hook can run."""
    with contextlib.suppress(Exception):
        if not faulthandler.is_enabled():
            faulthandler.enable(all_threads=True)


def install_error_recorder() -> None:
    """Chain a ``sys.excepthook`` that records uncaught exceptions; idempotent.

    The previous hook still runs afterwards, so the traceback still reaches stderr
    and the interpreter still exits with status 1.
    """
    global _installed_hook
    if _installed_hook is not None and sys.excepthook is _installed_hook:
        return
    previous = sys.excepthook

    def hook(exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None) -> None:
        if not issubclass(exc_type, KeyboardInterrupt):
            with contextlib.suppress(Exception):
                write_error_file(exc)
        previous(exc_type, exc, tb)

    _enable_faulthandler()
    sys.excepthook = _installed_hook = hook


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


#: The most of an error file that is read: a traceback is kilobytes; a rank that left a
#: 1 GiB (sparse) file there must not make the agent, which may be root, read it whole.
READ_CAP = 256 * 1024
#: The most of a parsed message and traceback that is kept (a traceback's end: its cause).
MESSAGE_CAP = 4000
TRACEBACK_CAP = 32_000


def read_error_file(
    path: str | os.PathLike[str], *, anchor: str | None = None
) -> dict[str, Any] | None:
    """Parse an error file written by ringleader or torch.

    Returns ``{"message", "traceback", "timestamp", "error_code"}`` (the last three may
    be None), or None when there is no file, it is empty, or it is not a plain file
    reachable without a link (``tenantfs``: the rank that wrote it may be
    another account than the reader, which may be root; ``anchor`` is the directory
    the walk starts from, default the path's deepest trusted ancestor).  At most
    ``READ_CAP`` bytes are read; message and traceback are capped too.  A file that
    is not the expected JSON still yields a dict, whose message is its raw text,
    because a half-understood error beats none.
    """
    from ringleader import tenantfs

    raw = tenantfs.read_or_none(os.fspath(path), READ_CAP, anchor)
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    if not text.strip():
        return None
    result: dict[str, Any] = {
        "message": text.strip()[:MESSAGE_CAP],
        "traceback": None,
        "timestamp": None,
        "error_code": None,
    }
    try:
        data = json.loads(text)
    except ValueError:
        return result
    if not isinstance(data, dict) or "message" not in data:
        return result
    message = data["message"]
    if isinstance(message, dict):
        extra = message.get("extraInfo")
        extra = extra if isinstance(extra, dict) else {}
        result["message"] = str(message.get("message", ""))[:MESSAGE_CAP]
        callstack = extra.get("py_callstack")
        result["traceback"] = str(callstack)[-TRACEBACK_CAP:] if callstack else None
        result["timestamp"] = _as_int(extra.get("timestamp"))
        result["error_code"] = _as_int(message.get("errorCode"))
    else:
        result["message"] = str(message)[:MESSAGE_CAP]
        result["timestamp"] = _as_int(data.get("timestamp"))
    return result
