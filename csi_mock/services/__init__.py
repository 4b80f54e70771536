"""CSI gRPC servicers: thin translations between protobuf and the backend."""
