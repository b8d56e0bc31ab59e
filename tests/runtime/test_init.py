"""init(), the world check and the error recorder, with real processes and real gloo.

Ranks are started here by hand, with the environment each launcher would give
them; nothing of torch.distributed is mocked.  Every wait has a timeout, so a
rendezvous that never completes fails the test instead of hanging it.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
import time
from pathlib import Path

import pytest

from ringleader.runtime import read_error_file
from tests.helpers.ranks import (
    clean_env,
    rank_envs,
    run_all,
)

WORKER = textwrap.dedent(
    """
    import json, os, torch, torch.distributed as dist
    from ringleader import runtime
    ctx = runtime.init(timeout_s=60)
    t = torch.tensor([float(ctx.rank + 1)])
    dist.all_reduce(t)
    print(json.dumps({
        "rank": ctx.rank, "world": ctx.world_size, "local_rank": ctx.local_rank,
        "backend": ctx.backend, "device": str(ctx.device), "source": ctx.source,
        "sum": t.item(), "main": runtime.is_main(), "env_rank": os.environ.get("RANK"),
    }))
    runtime.shutdown()
    """
)


@pytest.mark.parametrize("source", ["ringleader", "slurm", "openmpi"])
def test_two_ranks_join_and_all_reduce(source: str) -> None:
    results = run_all(WORKER, rank_envs(source, 2))
    for res in results:
        assert res.returncode == 0, res.stderr
    reports = [json.loads(res.stdout.strip().splitlines()[-1]) for res in results]
    assert [r["rank"] for r in reports] == [0, 1]
    assert [r["main"] for r in reports] == [True, False]
    for report in reports:
        assert report["sum"] == 3.0  # 1 + 2
        assert (report["world"], report["backend"], report["device"]) == (2, "gloo", "cpu")
        assert report["source"] == source
        assert report["env_rank"] == str(report["rank"])  # filled for env:// when absent


def test_no_launcher_is_a_world_of_one() -> None:
    (res,) = run_all(WORKER, [clean_env()])
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout.strip().splitlines()[-1])
    assert (report["world"], report["sum"], report["source"]) == (1, 1.0, "none")


def test_no_launcher_but_two_expected_fails() -> None:
    (res,) = run_all(WORKER, [clean_env(RINGLEADER_EXPECTED_WORLD_SIZE="2")])
    assert res.returncode != 0
    assert "NoLauncherEnvironment: no launcher environment was found" in res.stderr


def test_world_smaller_than_expected_fails_after_a_real_all_reduce(tmp_path: Path) -> None:
    error_file = tmp_path / "error.json"
    env = rank_envs("ringleader", 1)[0]
    env = {k: v for k, v in env.items() if not k.startswith("RINGLEADER_")}
    env.update(RINGLEADER_WORLD_SIZE="2", TORCHELASTIC_ERROR_FILE=str(error_file))
    (res,) = run_all(WORKER, [env])
    expected = "WorldSizeMismatch: joined a world of 1 rank(s) but 2 were expected"
    assert res.returncode != 0
    assert expected in res.stderr
    assert "MASTER_ADDR" in res.stderr
    # init() installed the recorder: the launcher learns why this rank died.
    parsed = read_error_file(error_file)
    assert parsed is not None
    assert parsed["message"].startswith(expected)
    assert "Traceback (most recent call last)" in parsed["traceback"]


def test_world_larger_than_expected_fails_without_waiting() -> None:
    env = rank_envs("ringleader", 1)[0]
    env.update(RINGLEADER_EXPECTED_WORLD_SIZE="2", WORLD_SIZE="3", RINGLEADER_WORLD_SIZE="3")
    (res,) = run_all(WORKER, [env])
    assert res.returncode != 0
    assert "joined a world of 3 rank(s) but 2 were expected" in res.stderr


# ---------------------------------------------------------------- error files

RAISES_UNDER_OUR_RECORD = """
from ringleader.runtime import record

@record
def main():
    raise ValueError("boom 42")

main()
"""

RAISES_UNDER_TORCH_RECORD = RAISES_UNDER_OUR_RECORD.replace(
    "from ringleader.runtime import record",
    "from torch.distributed.elastic.multiprocessing.errors import record",
)

RAISES_AT_TOP_LEVEL = """
from ringleader.runtime import install_error_recorder
install_error_recorder()
install_error_recorder()  # idempotent: one file, one traceback
raise KeyError("no such key")
"""


def _fail_with_error_file(code: str, path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    script = path.with_name(f"entry_{path.stem}.py")  # "torch.py" would shadow torch
    script.write_text(code)
    (res,) = run_all(str(script), [clean_env(TORCHELASTIC_ERROR_FILE=str(path), **env)])
    assert res.returncode == 1
    return res


def test_record_writes_torch_format(tmp_path: Path) -> None:
    path = tmp_path / "err.json"
    started = int(time.time())
    res = _fail_with_error_file(RAISES_UNDER_OUR_RECORD, path, RINGLEADER_ERROR_FILE=str(path))
    assert "ValueError: boom 42" in res.stderr  # still on stderr for humans
    raw = json.loads(path.read_text())
    assert set(raw) == {"message"}
    assert set(raw["message"]) == {"message", "extraInfo"}
    assert set(raw["message"]["extraInfo"]) == {"py_callstack", "timestamp"}
    assert isinstance(raw["message"]["extraInfo"]["timestamp"], str)
    parsed = read_error_file(path)
    assert parsed is not None
    assert parsed["message"] == "ValueError: boom 42"
    assert 'raise ValueError("boom 42")' in parsed["traceback"]
    assert parsed["traceback"].rstrip().endswith("ValueError: boom 42")
    assert started <= parsed["timestamp"] <= time.time() + 1


def test_read_error_file_written_by_torch_record(tmp_path: Path) -> None:
    ours, theirs = tmp_path / "ours.json", tmp_path / "torch.json"
    _fail_with_error_file(RAISES_UNDER_OUR_RECORD, ours)
    _fail_with_error_file(RAISES_UNDER_TORCH_RECORD, theirs)

    def shape(node: object) -> object:
        return {k: shape(v) for k, v in node.items()} if isinstance(node, dict) else type(node)

    assert shape(json.loads(ours.read_text())) == shape(json.loads(theirs.read_text()))
    parsed = read_error_file(theirs)
    assert parsed is not None
    assert parsed["message"] == "ValueError: boom 42"
    assert "boom 42" in parsed["traceback"]
    assert isinstance(parsed["timestamp"], int)


def test_excepthook_records_uncaught_exception(tmp_path: Path) -> None:
    path = tmp_path / "err.json"
    res = _fail_with_error_file(RAISES_AT_TOP_LEVEL, path, RINGLEADER_ERROR_FILE=str(path))
    assert res.stderr.count("Traceback (most recent call last)") == 1
    parsed = read_error_file(path)
    assert parsed is not None
    assert parsed["message"] == "KeyError: 'no such key'"


def test_ringleader_error_file_alone_is_enough(tmp_path: Path) -> None:
    path = tmp_path / "err.json"
    (res,) = run_all(RAISES_AT_TOP_LEVEL, [clean_env(RINGLEADER_ERROR_FILE=str(path))])
    assert res.returncode == 1
    assert read_error_file(path) is not None


def test_read_error_file_variants(tmp_path: Path) -> None:
    assert read_error_file(tmp_path / "missing.json") is None
    (tmp_path / "empty.json").write_text("")
    assert read_error_file(tmp_path / "empty.json") is None
    # torch's "new message format" and its errorCode override
    (tmp_path / "flat.json").write_text('{"message": "OOM on rank 3", "timestamp": 17}')
    flat = read_error_file(tmp_path / "flat.json")
    assert flat == {
        "message": "OOM on rank 3",
        "traceback": None,
        "timestamp": 17,
        "error_code": None,
    }
    coded = {"message": {"message": "x", "extraInfo": {"timestamp": "5"}, "errorCode": -11}}
    (tmp_path / "coded.json").write_text(json.dumps(coded))
    assert read_error_file(tmp_path / "coded.json") == {
        "message": "x",
        "traceback": None,
        "timestamp": 5,
        "error_code": -11,
    }
    (tmp_path / "junk.json").write_text("Segmentation fault\n")
    junk = read_error_file(tmp_path / "junk.json")
    assert junk is not None
    assert junk["message"] == "Segmentation fault"


def test_import_does_not_import_torch() -> None:
    code = (
        "import sys, ringleader, ringleader.runtime, ringleader.runtime.errorfile; "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    (res,) = run_all(code, [clean_env()])
    assert res.returncode == 0, res.stderr


def test_init_adopts_a_group_the_caller_created_and_shutdown_frees_ddp() -> None:
    # A DDP reducer alive at interpreter exit can abort the process (status 134).
    code = textwrap.dedent(
        """
        import torch, torch.distributed as dist
        from ringleader import runtime
        dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
        ctx = runtime.init()
        assert (ctx.world_size, ctx.backend) == (1, "gloo"), ctx
        assert runtime.init() is ctx
        model = runtime.prepare(torch.nn.Linear(3, 1))
        model(torch.ones(2, 3)).sum().backward()
        runtime.shutdown()
        assert not dist.is_initialized()
        assert not hasattr(model, "reducer")
        """
    )
    (res,) = run_all(code, [clean_env()])
    assert res.returncode == 0, res.stderr
