"""Deploying csi-mock into a cluster: the DriverDeployment spec, its sidecars and
images, and the two ways it runs (local processes, in-cluster pods)."""
