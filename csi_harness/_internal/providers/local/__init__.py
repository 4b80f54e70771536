"""A Docker-free local Kubernetes cluster: kubelet and containerd run as plain processes."""
