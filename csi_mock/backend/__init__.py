"""The fake storage system's behaviour: controller and node operations over the
model, the state store and the host. The CSI servicers translate to and from these."""
