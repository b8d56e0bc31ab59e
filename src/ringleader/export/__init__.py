"""What a workload becomes elsewhere: ``kubeflow`` writes Kubeflow's job manifests."""
