"""How a submit line splits into our options and the workload's command, and the
stand-in images table: pure functions, every rule of their docstrings."""

from __future__ import annotations

from typing import Any

import pytest

from ringleader.cli.main import COMMANDS
from ringleader.cli.submit_argv import ARGV_KEY, SubmitArgv
from ringleader.cli.submit_options import parsed
from ringleader.errors import InvalidSpec
from ringleader.server.images import STAND_INS, resolve_image, stand_in_for


def _read(line: str) -> tuple[SubmitArgv, dict[str, Any]]:
    """What ``submit-dist pytorch`` reads from ``line``: the split, and click's values."""
    command = COMMANDS["submit-dist"].load("submit-dist").commands["pytorch"]
    ctx = command.make_context("pytorch", line.split())
    return ctx.meta[ARGV_KEY], ctx.params


@pytest.mark.parametrize(
    ("line", "words", "bare"),
    [
        ("x --workers 1 -- python t.py -g 2", ["python", "t.py", "-g", "2"], set()),
        ("x --workers 1 python t.py -g 2", ["python", "t.py", "-g", "2"], set()),
        ("--workers=1 x -g1 python", ["python"], set()),
        ("x --workers 1 --command -- python t.py", ["python", "t.py"], {"command"}),
        ("x --command --workers 1 python t.py", ["python", "t.py"], {"command"}),
        ("x --workers 1 --command=sh --args=-c --args=true", [], set()),
        ("x --workers 1 --command sh --args -c --args true", [], set()),
        ("x --name-prefix --workers 1 -- true", ["true"], {"name_prefix"}),
        ("--name-prefix exp --workers 1 true", ["true"], set()),
        ("x --workers 1 -- --weird -- words", ["--weird", "--", "words"], set()),
    ],
)
def test_where_the_command_begins(line: str, words: list[str], bare: set[str]) -> None:
    split, _ = _read(line)
    assert split.command == words
    assert split.bare == bare


def test_values_and_typed_spellings() -> None:
    split, params = _read("x --workers 1 --command=sh --args -c --args=true -g0 -e A=1 -- more")
    assert params["command"] == ["sh"] and params["args"] == ["-c", "true"]
    assert params["gpu"] == 0 and params["env"] == ["A=1"]
    assert split.typed["gpu"] == "-g" and split.typed["env"] == "-e"
    options = parsed(split, {"workers": "--workers"}, params)
    assert options.flags["gpu"] == "-g" and options.command_words == ["more"]


@pytest.mark.parametrize(
    ("line", "named"),
    [
        ("x --workers 1 --attach -- true", "--attach"),
        ("x --workers 1 -z true", "-z"),
        ("x --workers", "--workers"),
        ("x --workers 1 --gpu", "--gpu"),
    ],
)
def test_an_unknown_option_or_a_missing_value_is_a_usage_error(line: str, named: str) -> None:
    from typer._click.exceptions import UsageError

    with pytest.raises(UsageError) as error:
        _read(line)
    assert named in error.value.format_message() and error.value.exit_code == 2


def _spec(line: str) -> dict[str, Any]:
    split, params = _read(line)
    options = parsed(split, {"workers": "--workers"}, params)
    return options.spec("default").model_dump(by_alias=True, exclude_none=True)["spec"]


@pytest.mark.parametrize(
    ("line", "command", "args"),
    [
        ("x --workers 1 -- python t.py", "python t.py", None),
        ("x --workers 1 --command=sh --args=-c --args=echo_hi", "sh", "-c echo_hi"),
        ("x --workers 1 --command -- python t.py", "python t.py", None),
        ("x --workers 1 -i kubeflow/pytorch-dist-mnist -- --epochs 2", None, "--epochs 2"),
        ("x --workers 1 -i kubeflow/pytorch-dist-mnist --command -- sh", "sh", None),
    ],
)
def test_command_and_args_fields(line: str, command: str | None, args: str | None) -> None:
    spec = _spec(line)
    assert spec.get("command") == command and spec.get("args") == args


def test_gpu_flags() -> None:
    assert _spec("x --workers 1 -g 0 -- t")["compute"] == {"gpuDevicesRequest": 0}
    assert _spec("x --workers 1 -g 2 -- t")["compute"] == {"gpuDevicesRequest": 2}
    portion = _spec("x --workers 1 -g 0.25 -- t")["compute"]
    assert portion == {
        "gpuDevicesRequest": 1,
        "gpuRequestType": "portion",
        "gpuPortionRequest": 0.25,
    }
    with pytest.raises(InvalidSpec, match="-g: above 1"):
        _spec("x --workers 1 -g 1.5 -- t")


NO_STORE = {"name": "podman", "path": "/nonexistent/podman", "version": "4.3.1"}


@pytest.mark.parametrize(
    "image",
    [
        "kubeflow/pytorch-dist-mnist",
        "kubeflow/pytorch-dist-mnist:latest",
        "docker.io/kubeflow/pytorch-dist-mnist:latest",
        "gcr.io/run-ai-demo/quickstart-distributed",
        "gcr.io/run-ai-demo/quickstart-distributed:latest",
    ],
)
def test_stand_in_images_with_and_without_their_tag(image: str) -> None:
    stand_in = stand_in_for(image)
    assert stand_in is not None and stand_in in STAND_INS
    assert resolve_image(image, runtime=None) is stand_in
    # With a runtime it is still the stand-in while the image is not in the store.
    assert resolve_image(image, runtime=NO_STORE) is stand_in


@pytest.mark.parametrize(
    "image",
    [
        "kubeflow/pytorch-dist-mnist:v2",
        "kubeflow/pytorch-dist-mnist@sha256:" + "0123456789abcdef" * 4,
        "kubeflow/pytorch-dist",
        "gcr.io:443/run-ai-demo/quickstart-distributed",
    ],
)
def test_other_images_are_refused_naming_the_stand_ins(image: str) -> None:
    assert stand_in_for(image) is None
    with pytest.raises(InvalidSpec) as error:
        resolve_image(image, runtime=None)
    assert error.value.where == "spec.image"
    assert "kubeflow/pytorch-dist-mnist[:latest]" in error.value.problem
    assert resolve_image(image, runtime=NO_STORE) is None  # it runs in its container


@pytest.mark.parametrize(
    "image",
    ["-v", "--privileged", "alpine;id", "alpine id", "$(id)", "a`id`", "Upper/case", "x@sha256:1"],
)
def test_what_is_no_image_reference_is_refused_with_or_without_a_runtime(image: str) -> None:
    for runtime in (None, NO_STORE):
        with pytest.raises(InvalidSpec) as error:
            resolve_image(image, runtime=runtime)
        assert error.value.where == "spec.image" and "not an image reference" in str(error.value)
