"""``make demo-image``'s checks before it builds anything (``examples/demo_image.py``):
each missing piece is said with its fix, and nothing is run.  The whole path (the
image made from examples/images/pytorch-cpu, then the digits workload in it to
Completed) takes minutes of pip and was run by hand; see the README's Images."""

from __future__ import annotations

import subprocess
import sys

import pytest

from ringleader.examples import demo_image


def _never(_argv: list[str]) -> str:
    raise AssertionError("nothing is run")


def test_a_user_that_is_not_root_is_told_to_use_sudo(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_image.os, "geteuid", lambda: 1000)
    problem = demo_image.ensure_image("localhost/x:1", ["ringleader"], {}, _never)
    assert problem == "the demo in an image needs root (rootful podman): sudo make demo-image"


def test_no_podman_names_the_package(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(demo_image.os, "geteuid", lambda: 0)
    monkeypatch.setattr(demo_image.shutil, "which", lambda _name: None)
    problem = demo_image.ensure_image("localhost/x:1", ["ringleader"], {}, _never)
    assert "podman is missing" in problem and "apt install podman" in problem


def test_the_checkout_holds_the_containerfile_it_builds_from() -> None:
    root = demo_image.repository_root()
    assert root is not None and (root / demo_image.CONTAINERFILE).is_file()


def test_the_demo_names_the_image_option_in_its_help() -> None:
    done = subprocess.run([sys.executable, "-m", "ringleader.examples.demo", "--help"],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode == 0 and "--image [IMAGE]" in done.stdout, done.stdout
