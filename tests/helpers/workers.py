"""How ``make test`` shares the suite between pytest-xdist's workers (``-n 2 --dist
loadfile``; tests/conftest.py installs the scheduler).

Each test module is one unit of work, so its module fixtures (servers, test hosts,
Slurm clusters) are made once, on one worker.  On top of xdist's ``loadfile``:

- modules that share one thing of the host's are one unit (``SHARED``), run on one
  worker one after another: pytest-xdist's own ``xdist_group`` marks cannot do it
  here (3.8 renames ``item._nodeid``, which pytest 9 no longer reads);
- the modules known to take minutes are handed out first (``SLOW_FIRST``), so the
  two workers end together rather than one finishing a long module alone.
"""

from __future__ import annotations

from typing import Any

# Module -> the thing of the host's it shares with the others of its group.
SHARED: dict[str, str] = {
    # A server on the default port (the autostart), or nothing answering there.
    "tests/server/test_autostart.py": "the default port 8470",
    "tests/server/test_one_server.py": "the default port 8470",
    "tests/cli/test_errors.py": "the default port 8470",
}

# The modules that took minutes in CI's --durations, longest first.
SLOW_FIRST: tuple[str, ...] = (
    "tests/bench/test_benchmarks_run.py",
    "tests/server/test_image_nodes.py",
    "tests/server/test_ssh_nodes.py",
    "tests/server/test_container_pods.py",
    "tests/server/test_openapi_fuzz.py",
    "tests/server/test_registry.py",
    "tests/server/test_workload_python.py",
    "tests/launch/test_multihost.py",
    "tests/slurm/test_backend_server.py",
    "tests/server/security/test_tenant_files.py",
    "tests/cli/test_errors.py",
    "tests/cluster/test_doctor.py",
)


def module_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


def unit_of(nodeid: str) -> str:
    """The unit of work a test belongs to: its module, or its module's group."""
    module = module_of(nodeid)
    return f"shared: {SHARED[module]}" if module in SHARED else module


def slow_first_key(nodeid: str) -> int:
    """Sort key (stable) that puts ``SLOW_FIRST``'s modules, in its order, first."""
    module = module_of(nodeid)
    return SLOW_FIRST.index(module) if module in SLOW_FIRST else len(SLOW_FIRST)


def make_scheduler(config: Any, log: Any) -> Any:
    """xdist's ``loadfile`` scheduling by ``unit_of``, in collection order: the workers
    collect ``SLOW_FIRST`` first (tests/conftest.py), and xdist's own reordering (by
    the number of tests in a unit, not their time) is turned off."""
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return unit_of(nodeid)

    config.option.loadscopereorder = False
    return ModuleScheduling(config, log)
