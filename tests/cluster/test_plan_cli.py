"""``ringleader plan`` as a user runs it: flags, the table, JSON, the chart, errors.

Why through the CLI: the planner's figures are tested in ``test_plan_model.py``;
here, that each way of giving the inputs (a parameter count, a model factory timed
here, a link rate, hosts whose link is measured) reaches those figures, and that a
bad flag is named, exit 2, without a traceback.
"""

from __future__ import annotations

import importlib.util
import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from ringleader.planner.model import TCP_PAYLOAD, Inputs, knee, predict, predict_all
from tests.fixtures.testhosts import (  # noqa: F401  (provides the `make_test_hosts` fixture)
    TestHostNetwork,
    make_test_hosts_fixture,
)
from tests.helpers.plan_cli import plan


def test_a_parameter_count_on_a_link_rate_gives_the_models_figures(tmp_path: Path) -> None:
    done = plan(tmp_path, "--params", "1M", "--step-time", "30ms", "--link", "800mbit",
                "--batch-size", "32", "--latency", "50us", "--max-ranks", "4", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    job = Inputs(params=1_000_000, dtype_bytes=4, forward_s=0.01, backward_s=0.02,
                 other_s=0.0, busbw=1e8 * TCP_PAYLOAD, latency_s=5e-5, batch_size=32)  # fmt: skip
    assert [p["ranks"] for p in body["predictions"]] == [1, 2, 3, 4]
    for got in body["predictions"]:
        want = predict(job, got["ranks"])
        assert got["step_s"] == pytest.approx(want.step_s)
        assert got["samples_per_s"] == pytest.approx(want.samples_per_s)
        assert got["bound"] == want.bound
    assert body["knee"]["ranks"] == knee(predict_all(job, range(1, 5)), job).ranks == 2
    assert body["source"]["link"] == "--link 800mbit"


def test_shared_cores_stretch_each_ranks_compute_as_the_model_does(tmp_path: Path) -> None:
    done = plan(tmp_path, "--params", "1M", "--step-time", "30ms", "--link", "800mbit",
                "--batch-size", "32", "--latency", "50us", "--max-ranks", "8",
                "--shared-cores", "2", "--threads", "1", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    job = Inputs(params=1_000_000, dtype_bytes=4, forward_s=0.01, backward_s=0.02,
                 other_s=0.0, busbw=1e8 * TCP_PAYLOAD, latency_s=5e-5, batch_size=32,
                 shared_cores=2, threads=1)  # fmt: skip
    want = predict_all(job, range(1, 9))
    assert [p["step_s"] for p in body["predictions"]] == pytest.approx([w.step_s for w in want])
    assert body["predictions"][7]["compute_s"] == pytest.approx(0.12)  # 4x on 8 ranks
    assert body["inputs"]["shared_cores"] == 2 and body["inputs"]["threads"] == 1
    table = plan(tmp_path, "--params", "1M", "--step-time", "30ms", "--link", "800mbit",
                 "--shared-cores", "2", "--threads", "1")  # fmt: skip
    assert "ranks of 1 thread(s) share 2 cores" in table.stdout, table.stdout


def test_the_table_fits_80_columns_and_says_the_knee(tmp_path: Path) -> None:
    done = plan(tmp_path, "--params", "25M", "--step-time", "120ms", "--link", "10gbit",
                "--max-ranks", "40")  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert all(len(line) <= 80 for line in lines), done.stdout
    assert "25M parameters, 100 MB of gradients a step; compute 120 ms" in done.stdout
    rows = [line.split()[0] for line in lines if line.split()[:1] and line.split()[0].isdigit()]
    assert rows == [*map(str, range(1, 17)), "32", "40"]  # then powers of two
    assert "knee at 3 ranks" in done.stdout and "communication-bound" in done.stdout


def test_a_model_factory_is_timed_here(tmp_path: Path) -> None:
    done = plan(tmp_path, "--model", "models:mlp", "--batch-size", "8", "--link", "1gbit",
                "--max-ranks", "2", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    assert body["inputs"]["params"] == 64 * 128 + 128 + 128 * 10 + 10
    assert body["inputs"]["dtype_bytes"] == 4 and body["source"]["compute"] == "measured here"
    timed = body["source"]["measured_compute"]
    assert timed["forward_s"] > 0 and timed["backward_s"] > 0
    assert body["inputs"]["compute_s"] == pytest.approx(
        timed["forward_s"] + timed["backward_s"] + timed["other_s"]
    )
    conv = plan(tmp_path, "--model", "models:conv", "--input-shape", "3,8,8", "--link",
                "1gbit", "--max-ranks", "2", "--json")  # fmt: skip
    assert conv.returncode == 0, conv.stderr
    assert json.loads(conv.stdout)["inputs"]["params"] == 3 * 4 * 9 + 4 + 144 * 2 + 2


def _require_matplotlib() -> None:
    if importlib.util.find_spec("matplotlib") is None:
        reason = "matplotlib is not installed (pip install -c constraints.txt matplotlib)"
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail(reason + " (CI=true, so this is an error, not a skip)")
        pytest.skip(reason)


@pytest.mark.parametrize("suffix", [".svg", ".png"])
def test_plot_writes_the_chart(tmp_path: Path, suffix: str) -> None:
    _require_matplotlib()
    chart = tmp_path / f"scaling{suffix}"
    done = plan(tmp_path, "--params", "25M", "--step-time", "120ms", "--link", "1gbit",
                "--plot", str(chart))  # fmt: skip
    assert done.returncode == 0, done.stderr
    head = chart.read_bytes()[:200]
    assert (b"<svg" in head) if suffix == ".svg" else head.startswith(b"\x89PNG\r\n")
    assert f"Chart: {chart}" in done.stdout


@pytest.mark.parametrize(
    ("args", "flag", "says"),
    [
        (["--params", "25X", "--step-time", "1s", "--link", "1gbit"], "--params", "count"),
        (["--params", "1M", "--step-time", "120", "--link", "1gbit"], "--step-time", "s, ms or us"),
        (["--params", "1M", "--link", "1gbit"], "--step-time", "cannot be measured"),
        (["--params", "1M", "--step-time", "1s", "--link", "fast"], "--link", "not a rate"),
        (["--params", "1M", "--step-time", "1s", "--link", "none"], "--link", "needs a rate"),
        (["--params", "1M", "--step-time", "1s"], "--link", "one of them"),
        (["--step-time", "1s", "--link", "1gbit"], "--model", "one of them"),
        (["--model", "models:mlp", "--params", "1M", "--link", "1gbit"], "--model", "one of"),
        (["--params", "1M", "--dtype", "int8", "--step-time", "1s", "--link", "1gbit"],
         "--dtype", "fp32"),
        (["--model", "nosuch:f", "--link", "1gbit"], "--model", "cannot import"),
        (["--model", "models:nothing", "--link", "1gbit"], "--model", "has no"),
        (["--model", "models:not_a_model", "--link", "1gbit"], "--model", "not a torch"),
        (["--model", "models", "--link", "1gbit"], "--model", "MODULE:FACTORY"),
        (["--model", "models:conv", "--link", "1gbit"], "--input-shape", "--input-shape"),
        (["--model", "models:mlp", "--input-shape", "0", "--link", "1gbit"], "--input-shape",
         "not a shape"),
        (["--params", "1M", "--step-time", "1s", "--link", "1gbit", "--plot", "x.pdf"],
         "--plot", ".svg or .png"),
        (["--params", "1M", "--step-time", "1s", "--latency", "5", "--link", "1gbit"],
         "--latency", "s, ms or us"),
        (["--params", "1M", "--step-time", "1s", "--link", "1gbit", "--bogus"], "--bogus", ""),
        (["--params", "1M", "--step-time", "1s", "--link", "1gbit", "--shared-cores", "0"],
         "--shared-cores", "0"),
    ],
)  # fmt: skip
def test_a_bad_flag_exits_2_naming_it(
    tmp_path: Path, args: list[str], flag: str, says: str
) -> None:
    done = plan(tmp_path, *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert flag in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


@pytest.mark.multihost
def test_hosts_link_is_measured_with_the_doctors_test(
    tmp_path: Path, make_test_hosts: Callable[..., TestHostNetwork]
) -> None:
    """Two test hosts at 50 Mbit: the pair's bus bandwidth is near 50 Mbit's payload
    (never above), and the plan uses it."""
    from ringleader.cluster.testhosts import rate

    net = make_test_hosts(2)
    rate.set_rate(net.hosts, 50 * 10**6)
    hostfile = tmp_path / "hosts.json"
    hostfile.write_text(json.dumps([{"ssh": h.address, "ips": [h.address]} for h in net.hosts]))
    done = plan(tmp_path, "--params", "1M", "--step-time", "10ms", "--hostfile", str(hostfile),
                "--ssh-config", str(net.ssh_config), "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    body = json.loads(done.stdout)
    (pair,) = body["source"]["pairs"]
    assert pair["hosts"] == [h.address for h in net.hosts]
    assert 0.5 * 50e6 / 8 < pair["busbw"] < 1.05 * 50e6 / 8, pair
    assert body["inputs"]["busbw"] == pair["busbw"] and body["inputs"]["latency_s"] > 0
    assert [p["ranks"] for p in body["predictions"]] == [1, 2]  # the hostfile's hosts
    # two hosts: the pair's hop is the only width measured
    assert body["source"]["hops"] == [{"ranks": 2, "latency_s": pair["latency_s"]}]
    assert body["inputs"]["hop_latencies"] == [[2, pair["latency_s"]]]
