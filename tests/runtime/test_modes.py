"""The modes' words: one parser for prepare(), launch, submit and the spec."""

from __future__ import annotations

import pytest

from ringleader.errors import InvalidSpec
from ringleader.runtime import steptime
from ringleader.runtime.modes import (
    DEFAULT_POWERSGD_RANK,
    CommMode,
    launch_env,
    make_mode,
    mode_env,
)


@pytest.mark.parametrize(
    ("compression", "every", "expected"),
    [
        (None, None, CommMode()),
        ("none", 1, CommMode()),
        ("BF16", None, CommMode("bf16")),
        ("fp16", "1", CommMode("fp16")),
        ("powersgd", None, CommMode("powersgd", DEFAULT_POWERSGD_RANK)),
        ("powersgd:8", None, CommMode("powersgd", 8)),
        (None, "8", CommMode(sync_every=8)),
        ("none", 16, CommMode(sync_every=16)),
    ],
)
def test_good_words(compression: object, every: object, expected: CommMode) -> None:
    assert make_mode(compression, every) == expected


@pytest.mark.parametrize(
    ("compression", "every", "where"),
    [
        ("zip", None, "grad_compression"),
        ("bf16:2", None, "grad_compression"),
        ("powersgd:0", None, "grad_compression"),
        ("powersgd:999", None, "grad_compression"),
        ("powersgd:", None, "grad_compression"),
        (3, None, "grad_compression"),
        (None, 0, "sync_every"),
        (None, "x", "sync_every"),
        (None, True, "sync_every"),
        (None, 10**9, "sync_every"),
        ("bf16", 4, "sync_every"),  # local SGD sends no gradients to compress
    ],
)
def test_bad_words_name_the_setting(compression: object, every: object, where: str) -> None:
    with pytest.raises(ValueError) as caught:
        make_mode(compression, every)
    assert caught.value.args[0] == where


def test_exact_ddp_adds_no_variable_and_the_others_round_trip() -> None:
    assert mode_env(CommMode()) == {}
    env = mode_env(make_mode("powersgd:4", None))
    assert env == {"RINGLEADER_GRAD_COMPRESSION": "powersgd:4"}
    assert mode_env(make_mode(None, 8)) == {"RINGLEADER_SYNC_EVERY": "8"}
    assert make_mode(env["RINGLEADER_GRAD_COMPRESSION"], None).rank == 4


def test_launch_env_names_the_flag() -> None:
    with pytest.raises(InvalidSpec) as caught:
        launch_env("gzip", None)
    assert caught.value.where == "--grad-compression"
    with pytest.raises(InvalidSpec) as caught:
        launch_env(None, 0)
    assert caught.value.where == "--sync-every"
    assert launch_env("bf16", None) == {"RINGLEADER_GRAD_COMPRESSION": "bf16"}


def test_steptime_gives_the_mean_since_the_last_take() -> None:
    steptime.take()
    assert steptime.take() is None
    steptime.add(0.3, steps=1)
    steptime.add(0.1, steps=1)
    steptime.add(0.2)  # averaging: time, no new step
    assert steptime.take() == pytest.approx(0.3)
    assert steptime.take() is None
