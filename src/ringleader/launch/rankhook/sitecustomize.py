"""Loaded by a rank's Python from ``PYTHONPATH``: tells the agent when the main path raised.

See ``ringleader.launch.teardown`` for the rule this serves.  Armed (the
variable ``RINGLEADER_MAIN_ENDED_FILE`` is set), it removes that variable and
its own ``PYTHONPATH`` entry from the environment (children are not armed),
then chains a ``sys.excepthook`` that, after the usual traceback:

1. records the exception in the rank's error file in torch's format
   (``TORCHELASTIC_ERROR_FILE``; kept if something already wrote one);
2. writes the marker: ``"<pid> <time>\\n"``.

A program that replaces ``sys.excepthook`` itself is still seen: a threading
at-exit callback, run before threads are joined, writes the marker when the
interpreter recorded an uncaught exception (``sys.last_value``).

Whatever happens, the user's own ``sitecustomize`` (the next one on
``sys.path``) is then loaded as if this one were not there.  Standard library
only, and nothing is imported at start-up beyond what ``site`` already has:
every armed rank pays for this file.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_VAR = "RINGLEADER_MAIN_ENDED_FILE"
_RECORDED = "_ringleader_error_recorded"  # ringleader.runtime.errorfile's mark: written once


def _drop_own_path_entry() -> None:
    """Take this directory off ``sys.path`` and ``PYTHONPATH``: user code never sees it."""
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]
    parts = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    rest = [p for p in parts if p and os.path.abspath(p) != _HERE]
    if rest:
        os.environ["PYTHONPATH"] = os.pathsep.join(rest)
    else:
        os.environ.pop("PYTHONPATH", None)


def _write_error_file(exc: BaseException) -> None:
    """torch's error-file format (``ringleader.runtime.errorfile.write_error_file``)."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE") or os.environ.get("RINGLEADER_ERROR_FILE")
    if not path or getattr(exc, _RECORDED, False) or os.path.exists(path):
        return
    import json
    import time
    import traceback

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
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _arm(marker: str) -> None:
    import time

    done = []

    def ended(exc: object) -> None:
        if done:
            return
        done.append(True)
        if isinstance(exc, BaseException):
            try:  # noqa: SIM105  (nothing imported that site did not already load)
                _write_error_file(exc)
            except Exception:
                pass  # the marker matters more than the record
        try:
            with open(marker, "w") as f:
                f.write(f"{os.getpid()} {time.time()}\n")
        except OSError:
            pass

    previous = sys.excepthook

    def hook(exc_type, exc, tb):  # type: ignore[no-untyped-def]
        try:
            previous(exc_type, exc, tb)  # the traceback first: it reaches the console
            for stream in (sys.stderr, sys.stdout):
                if stream is not None:
                    stream.flush()
        finally:
            ended(exc)

    sys.excepthook = hook

    def at_shutdown() -> None:  # main path over; threads not joined yet
        exc = getattr(sys, "last_exc", None) or getattr(sys, "last_value", None)
        if exc is not None:
            ended(exc)

    if "threading" in sys.modules:
        _register_at_shutdown(sys.modules["threading"], at_shutdown)
    else:  # no thread to join until threading is imported; importing it now costs ms
        sys.meta_path.insert(0, _WhenThreadingLoads(at_shutdown))


def _register_at_shutdown(threading, callback) -> None:  # type: ignore[no-untyped-def]
    """Run ``callback`` when the main thread ends, before other threads are joined."""
    try:  # noqa: SIM105  (a private API: without it, the excepthook alone still works)
        threading._register_atexit(callback)
    except Exception:
        pass


class _WhenThreadingLoads:
    """A meta path finder that only waits for ``threading`` to be imported, then lets
    the usual finder load it and registers the shutdown callback on it."""

    def __init__(self, callback) -> None:  # type: ignore[no-untyped-def]
        self.callback = callback

    def find_spec(self, name, path=None, target=None):  # type: ignore[no-untyped-def]
        if name != "threading":
            return None
        if self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = sys.modules["_frozen_importlib_external"].PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _ThenRegister(spec.loader, self.callback)
        return spec


class _ThenRegister:
    """``threading``'s own loader, then the registration; the module keeps its loader."""

    def __init__(self, loader, callback) -> None:  # type: ignore[no-untyped-def]
        self.loader = loader
        self.callback = callback

    def create_module(self, spec):  # type: ignore[no-untyped-def]
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:  # type: ignore[no-untyped-def]
        module.__loader__ = module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register_at_shutdown(module, self.callback)


def _chain() -> None:
    """Load the next ``sitecustomize`` on ``sys.path``, as ``site`` would have."""
    # The import system's own modules, always loaded: importlib.util would cost a rank's start.
    bootstrap = sys.modules["_frozen_importlib"]
    external = sys.modules["_frozen_importlib_external"]
    this = sys.modules.pop("sitecustomize", None)
    spec = external.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        if this is not None:
            sys.modules["sitecustomize"] = this
        return
    module = bootstrap.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception:
        sys.modules.pop("sitecustomize", None)
        raise  # site reports it as it would any sitecustomize's error


if __name__ == "sitecustomize":  # loaded by site, not imported as part of ringleader
    _marker = os.environ.pop(_VAR, "")
    _drop_own_path_entry()
    if _marker:
        _arm(_marker)
    _chain()
