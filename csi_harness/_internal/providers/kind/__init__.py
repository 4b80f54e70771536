"""The kind provider: csi-mock's in-cluster deployment on a kind cluster (needs Docker)."""
