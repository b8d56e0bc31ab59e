"""Backends run admitted workloads: local processes, SSH hosts, Slurm, Kubernetes."""
