"""Environment detection for every launcher, with plain dicts (no processes, no torch)."""

from __future__ import annotations

import dataclasses

import pytest

from ringleader.runtime.env import (
    PORT_BASE,
    PORT_SPAN,
    EnvError,
    NoLauncherEnvironment,
    RankEnv,
    detect,
    expected_world_size,
    export_defaults,
    port_from_job_id,
)
from ringleader.runtime.nodelist import expand_nodelist, expand_tasks_per_node


def ringleader_env(rank: int = 1) -> dict[str, str]:
    """What the ringleader launcher gives rank ``rank`` of 2 nodes x 2 ranks."""
    torchrun = {
        "RANK": str(rank),
        "LOCAL_RANK": str(rank % 2),
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": str(rank // 2),
        "NODE_RANK": str(rank // 2),
        "NNODES": "2",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "29400",
        "TORCHELASTIC_RUN_ID": "job-1",
    }
    ours = {f"RINGLEADER_{k}": v for k, v in torchrun.items() if k not in ("GROUP_RANK",)}
    ours.pop("RINGLEADER_TORCHELASTIC_RUN_ID")
    return {**torchrun, **ours, "RINGLEADER_JOB_ID": "job-1"}


# ---------------------------------------------------------------- ringleader / torchrun


def test_ringleader_env() -> None:
    env = detect(ringleader_env(rank=3))
    assert env == RankEnv("ringleader", 3, 1, 4, 2, 1, 2, "10.0.0.1", 29400)


def test_ringleader_twin_disagreeing_is_an_error() -> None:
    environ = {**ringleader_env(rank=1), "RANK": "0"}
    with pytest.raises(EnvError, match="RINGLEADER_RANK=1 but RANK=0"):
        detect(environ)


def test_torchrun_env() -> None:
    environ = {k: v for k, v in ringleader_env(rank=2).items() if not k.startswith("RINGLEADER")}
    assert detect(environ) == RankEnv("torchrun", 2, 0, 4, 2, 1, 2, "10.0.0.1", 29400)


def test_torchrun_wins_inside_slurm() -> None:
    environ = {
        "SLURM_PROCID": "0",
        "SLURM_NTASKS": "1",
        "SLURM_JOB_NODELIST": "n1",
        **{k: v for k, v in ringleader_env(3).items() if not k.startswith("RINGLEADER")},
    }
    assert detect(environ).source == "torchrun"
    assert detect(environ).rank == 3


@pytest.mark.parametrize(
    ("name", "value", "match"),
    [("RANK", "x", "RANK='x' is not an integer"), ("RANK", "4", "rank 4 is outside a world of 4")],
)
def test_malformed_values_name_the_problem(name: str, value: str, match: str) -> None:
    environ = {k: v for k, v in ringleader_env().items() if not k.startswith("RINGLEADER")}
    with pytest.raises(EnvError, match=match):
        detect({**environ, name: value})


# ---------------------------------------------------------------- Slurm


def slurm_env(**extra: str) -> dict[str, str]:
    base = {
        "SLURM_JOB_ID": "123456",
        "SLURM_PROCID": "5",
        "SLURM_LOCALID": "1",
        "SLURM_NODEID": "2",
        "SLURM_NTASKS": "8",
        "SLURM_NNODES": "4",
        "SLURM_TASKS_PER_NODE": "2(x4)",
        "SLURM_JOB_NODELIST": "gpu[07-09,11]",
    }
    return {**base, **extra}


def test_slurm_env() -> None:
    env = detect(slurm_env())
    assert env == RankEnv("slurm", 5, 1, 8, 2, 2, 4, "gpu07", PORT_BASE + 123456 % PORT_SPAN)


def test_slurm_respects_master_addr_and_port() -> None:
    env = detect(slurm_env(MASTER_ADDR="head", MASTER_PORT="4242"))
    assert (env.master_addr, env.master_port) == ("head", 4242)


def test_slurm_local_world_from_uneven_tasks_per_node() -> None:
    env = detect(slurm_env(SLURM_TASKS_PER_NODE="3(x2),1", SLURM_NODEID="2", SLURM_LOCALID="0"))
    assert env.local_world_size == 1
    assert detect(slurm_env(SLURM_NTASKS_PER_NODE="4", SLURM_LOCALID="3")).local_world_size == 4


def test_slurm_port_is_deterministic_and_in_range() -> None:
    assert port_from_job_id("123456") == 20000 + 3456
    assert port_from_job_id("123456") == port_from_job_id("123456")
    for job in ("1", "99999999", "123+0", "array_7"):
        assert PORT_BASE <= port_from_job_id(job) < PORT_BASE + PORT_SPAN


@pytest.mark.parametrize(
    ("nodelist", "hosts"),
    [
        ("n[1-3,5]", ["n1", "n2", "n3", "n5"]),
        ("a1,b[01-02]", ["a1", "b01", "b02"]),
        ("node7", ["node7"]),
        ("gpu[08-10]", ["gpu08", "gpu09", "gpu10"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("x[3],y-1,z[9-10]-ib", ["x3", "y-1", "z9-ib", "z10-ib"]),
    ],
)
def test_expand_nodelist(nodelist: str, hosts: list[str]) -> None:
    assert expand_nodelist(nodelist) == hosts


@pytest.mark.parametrize("nodelist", ["n[1-3", "n1-3]", "n[3-1]", "n[a-b]", "", "n[[1]]"])
def test_malformed_nodelist(nodelist: str) -> None:
    with pytest.raises(ValueError):
        expand_nodelist(nodelist)


def test_malformed_nodelist_in_env_is_an_env_error() -> None:
    with pytest.raises(EnvError, match="Slurm node list"):
        detect(slurm_env(SLURM_JOB_NODELIST="n[1-"))


def test_expand_tasks_per_node() -> None:
    assert expand_tasks_per_node("2(x3),1") == [2, 2, 2, 1]
    assert expand_tasks_per_node("4") == [4]


# ---------------------------------------------------------------- OpenMPI


def ompi_env(**extra: str) -> dict[str, str]:
    base = {
        "OMPI_COMM_WORLD_RANK": "3",
        "OMPI_COMM_WORLD_SIZE": "4",
        "OMPI_COMM_WORLD_LOCAL_RANK": "1",
        "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
        "OMPI_COMM_WORLD_NODE_RANK": "1",
        "MASTER_ADDR": "head",
        "MASTER_PORT": "29500",
    }
    return {**base, **extra}


def test_openmpi_env() -> None:
    assert detect(ompi_env()) == RankEnv("openmpi", 3, 1, 4, 2, 1, 2, "head", 29500)


def test_openmpi_wins_inside_sbatch() -> None:
    # mpirun in a batch script inherits the batch step's SLURM_PROCID=0.
    env = detect({**slurm_env(SLURM_PROCID="0"), **ompi_env()})
    assert (env.source, env.rank) == ("openmpi", 3)


def test_openmpi_single_node_needs_no_master_addr() -> None:
    environ = ompi_env(OMPI_COMM_WORLD_LOCAL_SIZE="4", OMPI_MCA_ess_base_jobid="77")
    del environ["MASTER_ADDR"], environ["MASTER_PORT"]
    env = detect(environ)
    assert env.master_addr == "127.0.0.1"
    assert env.master_port == port_from_job_id("77")


def test_openmpi_multi_node_without_master_addr_is_an_error() -> None:
    environ = ompi_env()
    del environ["MASTER_ADDR"]
    with pytest.raises(EnvError, match="MASTER_ADDR"):
        detect(environ)


# ---------------------------------------------------------------- Kubeflow


def test_kubeflow_pytorchjob() -> None:
    environ = {
        "MASTER_ADDR": "job-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "3",
        "RANK": "2",
        "PET_NNODES": "3",
        "PET_NPROC_PER_NODE": "1",
        "PET_NODE_RANK": "2",
        "PYTHONUNBUFFERED": "0",
    }
    assert detect(environ) == RankEnv("kubeflow", 2, 0, 3, 1, 2, 3, "job-master-0", 23456)


def test_kubeflow_elastic_nnodes_range_is_tolerated() -> None:
    environ = {"MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "2", "RANK": "1"}
    env = detect({**environ, "PET_NNODES": "1:3"})
    assert (env.source, env.rank, env.world_size, env.nnodes) == ("kubeflow", 1, 2, 2)


def test_kubeflow_several_procs_per_pod_need_torchrun() -> None:
    environ = {"MASTER_ADDR": "m", "MASTER_PORT": "1", "WORLD_SIZE": "8", "RANK": "1"}
    with pytest.raises(EnvError, match=r"PET_NPROC_PER_NODE=4 .* torchrun"):
        detect({**environ, "PET_NPROC_PER_NODE": "4"})


# ---------------------------------------------------------------- no launcher


def test_no_launcher_is_a_world_of_one() -> None:
    assert detect({"HOME": "/root"}) == RankEnv("none")
    assert detect({}, expected=1) == RankEnv("none")


def test_no_launcher_but_more_expected_is_an_error() -> None:
    with pytest.raises(NoLauncherEnvironment, match="no launcher environment was found"):
        detect({}, expected=2)
    with pytest.raises(NoLauncherEnvironment, match="world of one"):
        detect({"RINGLEADER_EXPECTED_WORLD_SIZE": "3"})


def test_expected_world_size_precedence() -> None:
    environ = {"RINGLEADER_WORLD_SIZE": "4", "WORLD_SIZE": "2"}
    assert expected_world_size(environ) == 4
    assert expected_world_size(environ, explicit=8) == 8
    assert expected_world_size({"WORLD_SIZE": "2"}) == 2
    assert expected_world_size({**environ, "RINGLEADER_EXPECTED_WORLD_SIZE": "6"}) == 6
    assert expected_world_size({}) is None


def test_export_defaults_fills_only_what_is_absent() -> None:
    environ = slurm_env(MASTER_PORT="5000")
    before = detect(environ)
    filled = export_defaults(before, environ)
    assert filled == {
        "RANK": "5",
        "WORLD_SIZE": "8",
        "LOCAL_RANK": "1",
        "LOCAL_WORLD_SIZE": "2",
        "GROUP_RANK": "2",
        "NODE_RANK": "2",
        "NNODES": "4",
        "MASTER_ADDR": "gpu07",
    }
    assert environ["MASTER_PORT"] == "5000"
    # Now it reads as torchrun's environment, and says the same thing.
    after = detect(environ)
    assert after == dataclasses.replace(before, source="torchrun")
    assert export_defaults(after, environ) == {}
    assert export_defaults(RankEnv("none"), environ) == {}


def test_hand_written_env_without_local_world_size() -> None:
    environ = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "h"}
    env = detect({**environ, "MASTER_PORT": "1"})
    assert (env.source, env.local_rank, env.local_world_size) == ("torchrun", 1, 2)
