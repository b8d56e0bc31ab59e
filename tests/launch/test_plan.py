"""The pure plan: rank numbering, the torchrun-compatible env, interface rules."""

from __future__ import annotations

from ringleader.hosts import Host
from ringleader.launch.mpirun import launcher_defaults, mpirun_argv
from ringleader.launch.plan import LaunchSpec, NodeFacts, build_plan
from ringleader.launch.ssh import SSHOptions


def spec(**kw) -> LaunchSpec:
    base = dict(
        command=["/venv/bin/python", "train.py"],
        hosts=[Host("a", "10.0.0.1", 2), Host("u@b", "10.0.0.2", 2)],
        run_id="rl-test",
        cwd="/work",
        python="/venv/bin/python",
        max_restarts=3,
    )
    base.update(kw)
    return LaunchSpec(**base)


FACTS = [
    NodeFacts(8, "/tmp/r/node-0", "eth1", "10.0.0.1", ring_ports=(40001, 40002)),
    NodeFacts(4, "/tmp/r/node-1", "tb0", "10.0.0.2", ring_ports=(50001, 50002)),
]


def test_golden_env_of_rank_3() -> None:
    plan = build_plan(spec(), FACTS, attempt=1, master_addr="10.0.0.1", master_port=41234)
    rank3 = plan.nodes[1].ranks[1]
    assert (rank3.rank, rank3.local_rank, rank3.node_rank) == (3, 1, 1)
    assert rank3.env == {
        "RANK": "3",
        "LOCAL_RANK": "1",
        "WORLD_SIZE": "4",
        "LOCAL_WORLD_SIZE": "2",
        "NODE_RANK": "1",
        "NNODES": "2",
        "MASTER_ADDR": "10.0.0.1",
        "MASTER_PORT": "41234",
        "RINGLEADER_RANK": "3",
        "RINGLEADER_LOCAL_RANK": "1",
        "RINGLEADER_WORLD_SIZE": "4",
        "RINGLEADER_LOCAL_WORLD_SIZE": "2",
        "RINGLEADER_NODE_RANK": "1",
        "RINGLEADER_NNODES": "2",
        "RINGLEADER_MASTER_ADDR": "10.0.0.1",
        "RINGLEADER_MASTER_PORT": "41234",
        "GROUP_RANK": "1",
        "GROUP_WORLD_SIZE": "2",
        "ROLE_NAME": "default",
        "ROLE_RANK": "3",
        "ROLE_WORLD_SIZE": "4",
        "TORCHELASTIC_RESTART_COUNT": "1",
        "TORCHELASTIC_MAX_RESTARTS": "3",
        "TORCHELASTIC_RUN_ID": "rl-test",
        "TORCHELASTIC_USE_AGENT_STORE": "False",
        "TORCHELASTIC_ERROR_FILE": "/tmp/r/node-1/attempt-1/rank-3.error.json",
        "PYTHONUNBUFFERED": "1",
        "RINGLEADER_JOB_ID": "rl-test",
        "RINGLEADER_RESTART_COUNT": "1",
        "RINGLEADER_MAX_RESTARTS": "3",
        "RINGLEADER_ERROR_FILE": "/tmp/r/node-1/attempt-1/rank-3.error.json",
        "RINGLEADER_NODE_IPS": "10.0.0.1\n10.0.0.2",
        "RINGLEADER_MASTER_NODE_IP": "10.0.0.1",
        "RINGLEADER_HOSTFILE": "/tmp/r/node-1/hostfile",
        "RINGLEADER_HOST": "b",
        "RINGLEADER_MAIN_ENDED_FILE": "/tmp/r/node-1/attempt-1/rank-3.ended",
        "RINGLEADER_NETWORK_INTERFACE": "tb0",
        "MLX_RANK": "3",
        "MLX_HOSTFILE": "/tmp/r/node-1/attempt-1/mlx-hostfile.json",
    }
    # MLX's ring: every host writes the same list, each rank's own host's address and port.
    ring = '[["10.0.0.1:40001"], ["10.0.0.1:40002"], ["10.0.0.2:50001"], ["10.0.0.2:50002"]]'
    assert plan.nodes[1].files == {"/tmp/r/node-1/attempt-1/mlx-hostfile.json": ring}
    # Picked interface and thread count are defaults: a user's own setting wins on the host.
    assert rank3.env_defaults == {
        "OMP_NUM_THREADS": "2",
        "GLOO_SOCKET_IFNAME": "tb0",
        "NCCL_SOCKET_IFNAME": "tb0",
    }
    assert plan.hostfile_text == "10.0.0.1 slots=2\n10.0.0.2 slots=2\n"
    assert plan.rank_host(2).name == "b"


def test_network_interface_flag_is_forced_and_user_env_wins_over_plan() -> None:
    plan = build_plan(
        spec(network_interface="ib0", env={"OMP_NUM_THREADS": "7", "FOO": "bar"}),
        FACTS,
        attempt=0,
        master_addr="10.0.0.1",
        master_port=1,
    )
    for node in plan.nodes:
        for r in node.ranks:
            assert r.env["GLOO_SOCKET_IFNAME"] == r.env["NCCL_SOCKET_IFNAME"] == "ib0"
            assert r.env["FOO"] == "bar" and r.env["OMP_NUM_THREADS"] == "7"
            assert "GLOO_SOCKET_IFNAME" not in r.env_defaults


def test_same_inputs_same_plan_and_ranks_fill_hosts_in_order() -> None:
    a = build_plan(spec(), FACTS, attempt=0, master_addr="10.0.0.1", master_port=5)
    b = build_plan(spec(), FACTS, attempt=0, master_addr="10.0.0.1", master_port=5)
    assert a == b
    assert [[r.rank for r in n.ranks] for n in a.nodes] == [[0, 1], [2, 3]]
    assert a.nodes[0].ranks[0].env_defaults["OMP_NUM_THREADS"] == "4"  # 8 cores / 2 ranks


def test_mpirun_argv_is_quoted_and_complete() -> None:
    argv = mpirun_argv(
        spec(env={"K": "v w"}),
        hostfile_path="/tmp/r/hostfile",
        error_dir="/tmp/r/a0",
        attempt=0,
        master_addr="10.0.0.1",
        master_port=999,
        ssh=SSHOptions(config_file="/cfg dir/ssh_config"),
        as_root=True,
    )
    assert argv[:9] == [
        "mpirun",
        "--hostfile",
        "/tmp/r/hostfile",
        "-np",
        "4",
        "--map-by",
        "slot",
        "--tag-output",
        "--allow-run-as-root",
    ]
    assert "ssh -F '/cfg dir/ssh_config' -o BatchMode=yes" in argv
    assert "MASTER_PORT=999" in argv and "K=v w" in argv and "RINGLEADER_JOB_ID=rl-test" in argv
    assert argv[-5:] == ["-m", "ringleader.launch.mpi_rank", "--", "/venv/bin/python", "train.py"]


def test_a_shell_in_the_launcher_gets_the_gangs_hostfile_and_remote_shell_as_defaults() -> None:
    """A plain ``mpirun`` typed in the launcher pod finds the gang's hosts and reaches
    them as the launch's own mpirun does (OpenMPI's ``OMPI_MCA_`` defaults)."""
    ssh = SSHOptions(config_file="/cfg/ssh_config")
    remote = launcher_defaults(spec(), ssh, "/tmp/r/hostfile")
    assert remote == {
        "OMPI_MCA_orte_default_hostfile": "/tmp/r/hostfile",
        "OMPI_MCA_plm_rsh_agent": "ssh -F /cfg/ssh_config -o BatchMode=yes",
    }
    here = spec(hosts=[Host("localhost", "127.0.0.1", 2)])
    assert launcher_defaults(here, ssh, "/h") == {"OMPI_MCA_orte_default_hostfile": "/h"}
    image = launcher_defaults(here, ssh, "/h", rsh_agent="python3 /r/mpi-rsh.py")
    assert image["OMPI_MCA_plm_rsh_agent"] == "python3 /r/mpi-rsh.py"
