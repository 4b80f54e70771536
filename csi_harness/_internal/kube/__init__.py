"""Kubernetes helpers the suites and the providers share: object builders, waits and
watches, descriptions, the nodes a driver runs on."""
