"""Kubernetes storage conformance harness for csi-mock."""
