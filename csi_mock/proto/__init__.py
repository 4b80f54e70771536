"""Generated CSI v1 protocol bindings (see scripts/gen_proto.py)."""
