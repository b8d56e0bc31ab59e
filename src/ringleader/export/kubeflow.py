"""A workload as Kubeflow runs it: PyTorchJob, TFJob, XGBoostJob, JAXJob or MPIJob
(the Training Operator's ``kubeflow.org/v1``), or Kubeflow Trainer's ``TrainJob``.

Why: seed 004's users move to Kubernetes (EKS with Kubeflow).  The workload they
ran here should be one ``kubectl apply -f`` away there, built with Kubeflow's own
SDK models (``kubeflow-training``'s for v1 jobs, ``kubeflow_trainer_api``'s for
TrainJob) so the field names and nesting are Kubeflow's, not a guess; every pod
template is checked as a Pod of Kubernetes 1.37 with ``kubernetes-validate``
(strict: an unknown field is an error).

What maps to what: the framework's pod layout is its replica specs (PyTorch and
XGBoost: Master + Worker; TF: Chief + Worker; JAX: Worker; MPI: Launcher running
``mpirun`` + Worker, ``slotsPerWorker``), each replica's container named as
Kubeflow's operator expects (``pytorch``, ``tensorflow``, ``xgboost``, ``jax``,
``mpi``); the spec's image, command and args, environment, working directory,
CPU/memory requests and limits and GPUs (``nvidia.com/gpu``) go to the
container; ``backoffLimit``, ``cleanPodPolicy`` and ``ttlAfterFinish`` to the
run policy.  Kubernetes has no GPU fractions: a portion asks for a whole device
and the export says so (``notes``).  An image is needed there: the workload's,
or ``image`` given here.

Not done here: submitting (``kubectl apply``), which needs a cluster; ringleader's
own pod environment (``RINGLEADER_*``), which Kubeflow's operators replace with
their own (MASTER_ADDR, TF_CONFIG...).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ringleader.errors import InvalidSpec
from ringleader.spec import PodSpec, WorkloadSpec

K8S_VERSION = "1.37.0"  # kubernetes-validate's newest schemas
V1 = "kubeflow.org/v1"
TRAINER = "trainer.kubeflow.org/v1alpha1"


def require_sdk() -> None:
    """Kubeflow's SDKs and kubernetes-validate are here, or a RingleaderError naming the
    install (``pip install 'ringleader[kubeflow]'``)."""
    import importlib.util

    from ringleader.errors import RingleaderError

    wanted = {"kubeflow.training": "kubeflow-training", "kubeflow_trainer_api": "kubeflow",
              "kubernetes_validate": "kubernetes-validate"}  # fmt: skip
    missing = []
    for module, package in wanted.items():
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:  # its parent package is missing
            found = False
        if not found:
            missing.append(package)
    if missing:
        raise RingleaderError(
            f"export kubeflow needs {', '.join(missing)}: pip install 'ringleader[kubeflow]'"
        )


@dataclass(frozen=True)
class Kind:
    """One framework's Kubeflow job: its kind, replica keys, container name."""

    kind: str
    head: str | None  # the head replica's key ("Master", "Chief", "Launcher") or None
    container: str
    runtime: str | None  # Kubeflow Trainer's built-in ClusterTrainingRuntime, if any
    replicas_field: str  # the job spec's field holding the replica specs


KINDS = {
    "PyTorch": Kind(
        "PyTorchJob", "Master", "pytorch", "torch-distributed", "pytorch_replica_specs"
    ),
    "TF": Kind("TFJob", "Chief", "tensorflow", None, "tf_replica_specs"),
    "XGBoost": Kind("XGBoostJob", "Master", "xgboost", "xgboost-distributed", "xgb_replica_specs"),
    "JAX": Kind("JAXJob", None, "jax", "jax-distributed", "jax_replica_specs"),
    "MPI": Kind("MPIJob", "Launcher", "mpi", None, "mpi_replica_specs"),
}


@dataclass
class Exported:
    """The manifest (a dict, as ``kubectl apply`` reads it) and what did not map."""

    manifest: dict[str, Any]
    notes: list[str] = field(default_factory=list)


def _container(
    name: str, pod: PodSpec, image: str, argv: list[str], notes: list[str], gpus: bool = True
) -> Any:
    """The container of one replica (``gpus``: False for MPI's launcher, which only runs
    mpirun); what cannot be said in Kubernetes' words goes to ``notes``, once."""
    from kubernetes import client as k8s

    compute = pod.compute
    requests: dict[str, str] = {}
    limits: dict[str, str] = {}
    if compute.cpu_core_request is not None:
        requests["cpu"] = f"{compute.cpu_core_request:g}"
    if compute.cpu_core_limit is not None:
        limits["cpu"] = f"{compute.cpu_core_limit:g}"
    if compute.cpu_memory_request:
        requests["memory"] = compute.cpu_memory_request
    if compute.cpu_memory_limit:
        limits["memory"] = compute.cpu_memory_limit
    asked = compute.gpus if gpus else 0
    if asked:
        whole = math.ceil(asked)
        note = f"Kubernetes has no GPU fractions: each pod's {asked:g} GPU becomes {whole}"
        if whole != asked and note not in notes:
            notes.append(note)
        limits["nvidia.com/gpu"] = str(whole)  # extended resources: limits (= requests)
    env = [k8s.V1EnvVar(name=k, value=v) for k, v in pod.env().items()]
    return k8s.V1Container(
        name=name, image=image, command=argv or None, env=env or None,
        working_dir=pod.working_dir or None,
        image_pull_policy=pod.image_pull_policy or None,
        resources=k8s.V1ResourceRequirements(requests=requests or None, limits=limits or None)
        if requests or limits else None,
    )  # fmt: skip


def _template(container: Any, labels: dict[str, str]) -> Any:
    from kubernetes import client as k8s

    return k8s.V1PodTemplateSpec(
        metadata=k8s.V1ObjectMeta(labels=labels), spec=k8s.V1PodSpec(containers=[container])
    )


def _checked(templates: dict[str, Any], api: Any) -> None:
    """Each pod template as a Pod of Kubernetes ``K8S_VERSION`` (strict), or InvalidSpec."""
    import kubernetes_validate

    for role, template in templates.items():
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"x-{role.lower()}"},
               "spec": api.sanitize_for_serialization(template.spec)}  # fmt: skip
        try:
            kubernetes_validate.validate(pod, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = ".".join(str(p) for p in exc.path)
            raise InvalidSpec(f"the {role} pod is not a valid Kubernetes pod: {exc.message}",
                              f"spec.{where}" if where else "spec") from None  # fmt: skip


def export(spec: WorkloadSpec, *, namespace: str, image: str | None = None) -> Exported:
    """The Training Operator's job for ``spec``."""
    from kubeflow.training import models as kf
    from kubernetes import client as k8s

    framework = spec.framework.value
    kind = KINDS[framework]
    image = _image(spec, image)
    notes: list[str] = []
    labels = {"ringleader.io/workload": spec.name}
    argv = spec.spec.argv()
    replicas: dict[str, Any] = {}
    if kind.head == "Launcher":  # mpirun there; the workers run what mpirun starts
        slots = spec.spec.slots_per_worker or 1
        world = str(spec.spec.num_workers * slots)
        mpirun = ["mpirun", "-np", world, *argv]
        launcher = _container(kind.container, spec.master(), image, mpirun, notes, gpus=False)
        replicas["Launcher"] = (1, launcher)
        replicas["Worker"] = (spec.spec.num_workers,
                              _container(kind.container, spec.spec, image, [], notes))  # fmt: skip
    else:
        if kind.head:
            head = _container(kind.container, spec.master(), image, argv, notes)
            replicas[kind.head] = (1, head)
        worker = _container(kind.container, spec.spec, image, argv, notes)
        replicas["Worker"] = (spec.spec.num_workers, worker)
    api = k8s.ApiClient()  # the SDK's serializer (it talks to no server here)
    templates = {role: _template(c, labels) for role, (_, c) in replicas.items()}
    _checked(templates, api)
    specs = {
        role: kf.KubeflowOrgV1ReplicaSpec(replicas=count, restart_policy="OnFailure",
                                          template=templates[role])
        for role, (count, _) in replicas.items()
    }  # fmt: skip
    policy = kf.KubeflowOrgV1RunPolicy(
        backoff_limit=spec.spec.backoff_limit, clean_pod_policy=spec.spec.clean_pod_policy,
        ttl_seconds_after_finished=spec.spec.ttl_after_finish_s,
    )  # fmt: skip
    meta = k8s.V1ObjectMeta(name=spec.name, namespace=namespace, labels=labels)
    job = _job(kf, kind, specs, policy, meta, spec)
    return Exported(api.sanitize_for_serialization(job), notes)


def _job(kf: Any, kind: Kind, specs: dict[str, Any], policy: Any, meta: Any,
         spec: WorkloadSpec) -> Any:  # fmt: skip
    """The SDK's ``KubeflowOrgV1<Kind>`` with its ``<kind>_replica_specs``."""
    fields = {kind.replicas_field: specs, "run_policy": policy}
    if kind.kind == "MPIJob":
        fields["slots_per_worker"] = spec.spec.slots_per_worker or 1
    job_spec = getattr(kf, f"KubeflowOrgV1{kind.kind}Spec")(**fields)
    return getattr(kf, f"KubeflowOrgV1{kind.kind}")(
        api_version=V1, kind=kind.kind, metadata=meta, spec=job_spec
    )


def _image(spec: WorkloadSpec, given: str | None) -> str:
    image = given or spec.master().image or spec.spec.image
    if not image:
        raise InvalidSpec(
            f"workload {spec.name!r} names no image, and Kubernetes runs every pod in one: "
            "give the image its pods should run (it needs your program and its packages)",
            "--image",
        )
    return image


def export_trainjob(
    spec: WorkloadSpec, *, namespace: str, image: str | None = None, runtime: str | None = None
) -> Exported:
    """Kubeflow Trainer's ``TrainJob`` for ``spec``: every pod one node of ``runtime``
    (the framework's built-in ClusterTrainingRuntime unless named)."""
    from kubeflow_trainer_api import models as tr
    from kubernetes import client as k8s

    framework = spec.framework.value
    kind = KINDS[framework]
    name = runtime or kind.runtime
    if not name:
        raise InvalidSpec(
            f"Kubeflow Trainer ships no built-in runtime for {framework}: export a "
            f"{kind.kind} (leave out --trainer-v2), or name your own ClusterTrainingRuntime",
            "--runtime",
        )
    image = _image(spec, image)
    notes: list[str] = []
    if not spec.master_spec_same_as_worker and spec.master_spec is not None:
        notes.append("TrainJob has one pod setup for every node: the master's own is left out")
    container = _container("node", spec.spec, image, spec.spec.argv(), notes)
    api = k8s.ApiClient()
    _checked({"node": _template(container, {})}, api)
    nodes = spec.spec.num_workers + (1 if kind.head and kind.head != "Launcher" else 0)
    serialized = api.sanitize_for_serialization(container)
    trainer = tr.TrainerV1alpha1Trainer.from_dict({
        "image": image, "command": serialized.get("command"), "numNodes": nodes,
        "env": serialized.get("env"), "resourcesPerNode": serialized.get("resources"),
    })  # fmt: skip
    job = tr.TrainerV1alpha1TrainJob.from_dict({
        "apiVersion": TRAINER, "kind": "TrainJob",
        "metadata": {"name": spec.name, "namespace": namespace,
                     "labels": {"ringleader.io/workload": spec.name}},
        "spec": {"runtimeRef": {"name": name, "kind": "ClusterTrainingRuntime",
                                "apiGroup": "trainer.kubeflow.org"},
                 "trainer": trainer.to_dict()},
    })  # fmt: skip
    if spec.spec.working_dir:
        notes.append("TrainJob's trainer has no working directory: the image's is used")
    return Exported(job.to_dict(), notes)
