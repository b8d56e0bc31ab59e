"""Why a Slurm job waits, in plain words: ``Reason=Resources`` -> a sentence.

Shared by ``launch --slurm`` (says it once while the job pends) and the server's
Slurm backend (a pending workload's reason).  Pure; an unknown reason is shown as
Slurm's own word, never dropped.
"""

from __future__ import annotations

__all__ = ["pending_reason"]

_WORDS = {
    "Resources": "the nodes it asks for are busy; it starts when they free up",
    "Priority": "jobs with a higher priority are ahead of it in the queue",
    "Dependency": "it waits for a job it depends on",
    "DependencyNeverSatisfied": "a job it depends on ended so that it can never start",
    "BeginTime": "its start time (--begin) has not come yet",
    "JobHeldUser": "it is held by its user (scontrol release JOBID)",
    "JobHeldAdmin": "it is held by an administrator",
    "PartitionDown": "its partition is down",
    "PartitionInactive": "its partition is inactive",
    "PartitionNodeLimit": "it asks for more nodes than its partition allows",
    "PartitionTimeLimit": "its --time is over its partition's limit",
    "PartitionConfig": "it asks for more than its partition's configuration allows",
    "ReqNodeNotAvail": "a node it needs is not available (down, drained or reserved)",
    "NodeDown": "a node it needs is down",
    "Reservation": "it waits for its reservation to start",
    "QOSMaxGRESPerUser": "your QOS allows no more GPUs (GRES) at once for you",
    "QOSMaxCpuPerUserLimit": "your QOS allows no more CPUs at once for you",
    "QOSMaxJobsPerUserLimit": "your QOS allows no more running jobs for you",
    "QOSMaxNodePerUserLimit": "your QOS allows no more nodes at once for you",
    "QOSGrpCpuLimit": "its QOS group has no CPUs left now",
    "QOSGrpGRES": "its QOS group has no GPUs (GRES) left now",
    "AssocMaxJobsLimit": "your account allows no more running jobs",
    "AssocGrpCpuLimit": "your account's group has no CPUs left now",
    "AssocGrpGRES": "your account's group has no GPUs (GRES) left now",
    "InvalidAccount": "its account is not valid here",
    "InvalidQOS": "its QOS is not valid here",
    "BadConstraints": "no node can ever satisfy what it asks for",
    "launch failed requeued held": "starting it failed, so Slurm requeued and held it",
}


def pending_reason(reason: str | None) -> str:
    """Slurm's ``Reason`` as a sentence (``Resources (the nodes it asks for are busy...)``)."""
    if not reason or reason == "None":
        return "waiting for Slurm to schedule it"
    words = _WORDS.get(reason)
    return f"{reason}: {words}" if words else f"{reason} (Slurm's reason)"
