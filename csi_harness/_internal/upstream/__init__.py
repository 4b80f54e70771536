"""Kubernetes' upstream storage e2e suites (e2e.test) against csi-mock."""
