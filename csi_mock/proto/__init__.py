"""Generated CSI v1 and kubelet plugin registration v1 protocol bindings (see scripts/gen_proto.py)."""
