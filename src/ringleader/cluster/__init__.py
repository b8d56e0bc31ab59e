"""Cluster operations: passwordless SSH set-up, and (next) doctor, sync, install, netbench."""
