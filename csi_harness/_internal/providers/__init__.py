"""The clusters a test runs on: local processes, kind, or an existing cluster."""
