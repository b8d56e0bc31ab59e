"""The scheduler inside the server, end to end on simulated nodes with real ranks.

A simulated node's pods run on this machine; what they get is what a real
node would give them: CUDA_VISIBLE_DEVICES for their devices, the share of a
fraction. Quotas, reclaim and restart after preemption go through the API,
the loops and the local backend, on SQLite and PostgreSQL.
"""

from __future__ import annotations

import time
from typing import Any

from tests.server.conftest import API, ServerProcess

# Each pod prints what it was given, then waits to be stopped (or preempted).
SHOW_ENV = (
    "python -c \"import os, time; print('GOT', os.environ['RINGLEADER_NODE'], "
    "os.environ['CUDA_VISIBLE_DEVICES'], os.environ.get('RINGLEADER_GPU_FRACTION', '-'), "
    'flush=True); time.sleep(600)"'
)

# ... and counts its starts in a checkpoint (runtime.save_checkpoint, rank 0 writes).
CHECKPOINTED = (
    'python -c "import os, time; from ringleader import runtime; '
    "state = runtime.load_checkpoint(); print('START', state, flush=True); "
    "runtime.save_checkpoint({'starts': (state or {}).get('starts', 0) + 1}); "
    "print('GOT', os.environ['RINGLEADER_NODE'], os.environ['CUDA_VISIBLE_DEVICES'], '-', "
    'flush=True); time.sleep(600)"'
)


def project(api: API, name: str, gpu: float, **extra: Any) -> None:
    body = {"name": name, "resources": [{"nodePool": "default", "gpu": {"deserved": gpu}}]}
    body["resources"][0]["gpu"].update(extra)
    response = api.post("/api/v1/org-unit/projects", json=body)
    assert response.status_code == 201, response.text


def submitted(response: Any) -> str:
    assert response.status_code == 202, response.text
    return response.json()["workloadId"]


def got(api: API, workload_id: str, pods: int, timeout: float = 60) -> dict[str, list[str]]:
    """The GOT line each pod printed: pod -> [node, devices, fraction]."""
    deadline = time.monotonic() + timeout
    while True:
        text = api.get(f"/api/v1/workloads/{workload_id}/logs").text
        lines = {}
        for line in text.splitlines():
            pod, _, rest = line.partition(" ")
            if rest.startswith("GOT "):
                lines[pod.strip("[]")] = rest.split()[1:]
        if len(lines) >= pods:
            return lines
        assert time.monotonic() < deadline, f"pods printed {lines}; logs:\n{text}"
        time.sleep(0.1)


def events(api: API, workload_id: str) -> list[dict[str, Any]]:
    return api.get(f"/api/v1/workloads/{workload_id}/events").json()["events"]


def test_fractions_share_one_device_and_the_pods_get_their_share(sim_api: API) -> None:
    half = {"compute": {"gpuDevicesRequest": 1, "gpuRequestType": "portion",
                        "gpuPortionRequest": 0.5}}  # fmt: skip
    wid = submitted(sim_api.submit("halves", SHOW_ENV, **half))
    sim_api.wait_phase(wid, {"Running"})
    seen = got(sim_api, wid, pods=2)
    assert sorted(seen) == ["halves-master-0", "halves-worker-0"]
    assert {tuple(v) for v in seen.values()} == {("sim-0", "0", "0.5")}  # both on device 0

    w = sim_api.get(f"/api/v1/workloads/{wid}").json()
    assert (w["allocatedGpus"], w["requestedGpus"], w["nodes"]) == (1.0, 1.0, ["sim-0"])
    pods = sim_api.get(f"/api/v1/workloads/{wid}/pods").json()["pods"]
    assert [p["gpus"] for p in pods] == [[{"index": 0, "share": 0.5, "memoryBytes": None}]] * 2
    node = sim_api.get("/api/v1/nodes/sim-0").json()
    assert node["simulated"] and node["kind"] == "simulated"
    assert [g["allocated"] for g in node["gpus"]] == [1.0, 0.0, 0.0, 0.0]
    # The local backend does not isolate GPUs: the history says who keeps the shares.
    sharing = [e for e in events(sim_api, wid) if e["type"] == "GPUSharing"]
    assert len(sharing) == 1 and "not enforced" in sharing[0]["message"], sharing
    assert "halves-master-0, halves-worker-0" in sharing[0]["message"]

    whole = submitted(sim_api.submit("whole", SHOW_ENV, compute={"gpuDevicesRequest": 1}))
    sim_api.wait_phase(whole, {"Running"})
    devices = sorted(v[1] for v in got(sim_api, whole, pods=2).values())
    assert devices == ["1", "2"]  # whole devices never share, and never device 0 here


def test_a_gang_that_cannot_fit_stays_pending_with_the_reason(sim_api: API) -> None:
    wid = submitted(sim_api.submit("huge", SHOW_ENV, workers=2, compute={"gpuDevicesRequest": 2}))
    w = sim_api.wait_phase(wid, {"Pending"})
    deadline = time.monotonic() + 30
    while not w["pendingReason"] and time.monotonic() < deadline:
        time.sleep(0.1)
        w = sim_api.get(f"/api/v1/workloads/{wid}").json()
    assert "needs 2 whole GPUs per pod" in w["pendingReason"], w
    assert w["phaseReason"] == "Unschedulable" and w["runningPods"] == 0
    assert sim_api.get(f"/api/v1/workloads/{wid}/pods").json()["pods"] == []  # no pod started
    assert [e["type"] for e in events(sim_api, wid)].count("Unschedulable") == 1


def test_reclaim_preempts_the_over_quota_workload_which_restarts_when_it_fits(
    sim_api: API,
) -> None:
    project(sim_api, "team-a", 2)
    project(sim_api, "team-b", 2)
    big = submitted(
        sim_api.submit("big", CHECKPOINTED, project="team-a", compute={"gpuDevicesRequest": 2})
    )
    sim_api.wait_phase(big, {"Running"})
    first = got(sim_api, big, pods=2)
    assert sorted(v[1] for v in first.values()) == ["0,1", "2,3"]  # over quota: all 4 GPUs

    small = submitted(
        sim_api.submit("small", SHOW_ENV, project="team-b", compute={"gpuDevicesRequest": 1})
    )
    sim_api.wait_phase(small, {"Running"})
    w = sim_api.wait_phase(big, {"Pending"})
    preempted = [e for e in events(sim_api, big) if e["type"] == "Preempted"]
    assert len(preempted) == 1
    assert "reclaimed for 'small' of project team-b" in preempted[0]["message"]
    assert w["phaseReason"] in ("Preempted", "Unschedulable")
    pods = sim_api.get(f"/api/v1/workloads/{big}/pods").json()["pods"]
    assert {p["status"] for p in pods} == {"Stopped"}

    assert sim_api.delete(f"/api/v1/workloads/distributed/{small}").status_code == 202
    sim_api.wait_phase(big, {"Running"}, timeout=90)  # it fits again: placed and restarted
    scheduled = [e for e in events(sim_api, big) if e.get("reason") == "Scheduled"]
    assert len(scheduled) == 2
    deadline = time.monotonic() + 60  # and it went on from the checkpoint the first run saved
    while "START {'starts': 1}" not in (text := sim_api.get(f"/api/v1/workloads/{big}/logs").text):
        assert time.monotonic() < deadline, text
        time.sleep(0.1)
    assert "START None" in text  # the first run found none


def test_nodes_list_and_top_show_simulated_nodes_and_allocation(tmp_path: Any) -> None:
    server = ServerProcess(tmp_path / "home", "--simulate-nodes", "2x4gpu:40G@a100")
    server.start()
    try:
        made = server.cli("project", "create", "team-a", "--gpu", "2", "--gpu-limit", "3",
                          "--over-quota-weight", "2", "--node-pool", "a100")  # fmt: skip
        assert made.returncode == 0, made.stderr
        listed = server.cli("project", "list")
        assert "team-a" in listed.stdout and "a100" in listed.stdout, listed.stdout
        submit = server.cli(
            "submit-dist", "pytorch", "frac", "--workers", "1", "-g", "0.25", "-p", "team-a",
            "--", "python", "-c", "import time; time.sleep(600)",
        )  # fmt: skip
        assert submit.returncode == 0, submit.stderr
        deadline = time.monotonic() + 60
        while True:
            top = server.cli("top", "job", "-p", "team-a")
            rows = [line.split()[:3] for line in top.stdout.splitlines()]
            if ["frac", "team-a", "Running"] in rows:
                break
            assert time.monotonic() < deadline, top.stdout + top.stderr
            time.sleep(0.2)
        assert "0.5 (0.5)" in top.stdout and "sim-0" in top.stdout, top.stdout
        nodes = server.cli("nodes", "list")
        assert nodes.returncode == 0, nodes.stderr
        rows = [line.split() for line in nodes.stdout.splitlines()[1:]]
        assert [r[:5] for r in rows] == [
            ["sim-0", "simulated", "a100", "Ready", "4"],
            ["sim-1", "simulated", "a100", "Ready", "4"],
        ]
        assert rows[0][5] == "40G"
        node_top = server.cli("top", "node")
        assert "0:0.5" in node_top.stdout and "0.5/4" in node_top.stdout, node_top.stdout
        described = server.cli("describe", "frac", "-p", "team-a")
        assert "0 (0.25)" in described.stdout and "GPUs: 0.5 allocated" in described.stdout
        huge = server.cli("submit-dist", "pytorch", "huge", "--workers", "1", "-g", "5",
                          "-p", "team-a", "--", "true")  # fmt: skip
        assert huge.returncode == 0, huge.stderr
        deadline = time.monotonic() + 30
        while (
            "would pass its GPU limit" not in (listed := server.cli("list", "-p", "team-a")).stdout
        ):
            assert time.monotonic() < deadline, listed.stdout + listed.stderr
            time.sleep(0.2)
        assert "PENDING REASON" in listed.stdout
    finally:
        server.kill()
        from tests.server.conftest import stop_workloads

        stop_workloads(server.home)


def test_bad_simulated_nodes_are_refused_naming_the_flag_or_the_line(tmp_path: Any) -> None:
    bad = ServerProcess(tmp_path / "a", "--simulate-nodes", "4x8")
    done = bad.cli("server", "--port", str(bad.port), "--simulate-nodes", "4x8")
    assert done.returncode == 2 and "--simulate-nodes" in done.stderr, done.stderr
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text("nodes:\n  - name: a\n    gpus: 2\n  - name: b\n    gpus: lots\n")
    done = bad.cli("server", "--port", str(bad.port), "--nodes-file", str(inventory))
    assert done.returncode == 2 and f"{inventory}:4" in done.stderr, done.stderr


def test_on_this_machine_a_cpu_request_pins_each_pod_to_cores_of_its_own(api: API) -> None:
    import os

    if len(os.sched_getaffinity(0)) < 2:
        raise AssertionError("this test needs 2 usable cores")
    show = (
        "python -c \"import os; print('GOT', os.environ['RINGLEADER_NODE_KIND'], "
        "sorted(os.sched_getaffinity(0)), os.environ['OMP_NUM_THREADS'], flush=True)\""
    )
    wid = submitted(api.submit("pinned", show, compute={"cpuCoreRequest": 1}))
    api.wait_phase(wid, {"Completed"})
    seen = got(api, wid, pods=2)
    assert sorted(" ".join(v) for v in seen.values()) == [
        f"local [{c}] 1" for c in sorted(os.sched_getaffinity(0))[:2]
    ]


def test_this_machine_is_the_node_and_without_gpus_it_has_marked_stand_ins(api: API) -> None:
    from ringleader.server.inventory import nvidia_gpus

    (node,) = api.get("/api/v1/nodes").json()
    assert node["kind"] == "local" and not node["simulated"] and node["status"] == "Ready"
    assert node["cpuCores"] >= 1 and node["memoryBytes"] > 0
    if nvidia_gpus():
        assert not any(g["simulated"] for g in node["gpus"])
    else:  # the Run:ai walkthroughs ask for -g 0.1: simulated devices stand in, said so
        assert node["gpuCount"] == 8 and all(g["simulated"] for g in node["gpus"])
        assert "simulated GPUs stand in" in node["message"]
    assert api.get("/api/v1/nodes/nope").status_code == 404


def test_only_admins_set_quotas_and_others_see_no_foreign_pods_on_nodes(sim_api: API) -> None:
    wid = submitted(sim_api.submit("admins", SHOW_ENV, compute={"gpuDevicesRequest": 1}))
    sim_api.wait_phase(wid, {"Running"})
    bob_headers = sim_api.new_user("bob")
    body = {"name": "bobs", "resources": [{"nodePool": "default", "gpu": {"deserved": 4}}]}
    made = sim_api.client.post("/api/v1/org-unit/projects", json=body, headers=bob_headers)
    assert made.status_code == 403 and "admin" in made.json()["message"]
    put = sim_api.client.put(
        "/api/v1/org-unit/projects/default", json={"resources": []}, headers=bob_headers
    )
    assert put.status_code in (403, 404)  # not his project, and not an admin
    (node,) = sim_api.client.get("/api/v1/nodes", headers=bob_headers).json()
    assert node["allocatedGpus"] == 2.0 and node["pods"] == []  # amounts yes, names no
    (mine,) = sim_api.get("/api/v1/nodes").json()
    assert sorted(mine["pods"]) == ["admins-master-0", "admins-worker-0"]


def test_node_registration_refusals_name_the_reason_and_store_nothing(sim_api: API) -> None:
    """Only admins register or remove nodes; declared nodes are not removed through
    the API; a name taken is a 409 before any probe runs (the probe is replaced here:
    the real one is tested on sshd hosts in test_ssh_nodes.py)."""
    probed: list[str] = []

    def probe(target: str, python: str, ssh: object) -> dict[str, Any]:
        probed.append(target)
        return {"cpu_cores": 4, "memory_bytes": 2**33, "gpus": [], "ringleader": "0.1.0"}

    sim_api.client.app.state.probe_node = probe
    bob = sim_api.new_user("bob")
    refused = sim_api.post("/api/v1/nodes", json={"ssh": "gpu9"}, headers=bob)
    assert refused.status_code == 403 and "admin" in refused.json()["message"]
    assert sim_api.delete("/api/v1/nodes/sim-0", headers=bob).status_code == 403

    declared = sim_api.delete("/api/v1/nodes/sim-0")
    assert declared.status_code == 409 and "--simulate-nodes" in declared.json()["message"]
    taken = sim_api.post("/api/v1/nodes", json={"ssh": "me@sim-0"})
    assert taken.status_code == 409 and "already registered" in taken.json()["message"]
    assert probed == []  # neither refused request reached the host

    added = sim_api.post("/api/v1/nodes", json={"ssh": "me@gpu9", "pool": "extra"})
    assert added.status_code == 201, added.text
    node = added.json()
    assert (node["name"], node["kind"], node["address"], node["status"]) == (
        "gpu9", "ssh", "gpu9", "Ready"
    )  # fmt: skip
    assert probed == ["me@gpu9"]
    assert sim_api.delete("/api/v1/nodes/gpu9").status_code == 204
    assert [n["name"] for n in sim_api.get("/api/v1/nodes").json()] == ["sim-0"]
