"""Cluster sources: each returns the kubeconfig (a secret Output) of the cluster it
creates; the InferenceCluster component turns that into the cluster's provider."""
