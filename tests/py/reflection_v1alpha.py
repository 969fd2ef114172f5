"""Asks each address given for its services over gRPC server reflection, as Python's
grpcio-reflection client does it (the v1alpha protocol), and resolves every `ferry.` service's
methods from the file descriptors the server sends. Prints `SERVICE <addr> <name>` and
`METHOD <addr> <service>/<method>` lines; a failed call exits non-zero with the gRPC error."""

import sys

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main() -> int:
    for addr in sys.argv[1:]:
        with grpc.insecure_channel(addr) as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            db = ProtoReflectionDescriptorDatabase(channel)
            services = sorted(db.get_services())
            pool = DescriptorPool(db)
            for name in services:
                print(f"SERVICE {addr} {name}")
                if name.startswith("ferry."):
                    for method in pool.FindServiceByName(name).methods:
                        print(f"METHOD {addr} {name}/{method.name}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except grpc.RpcError as e:
        print(f"reflection call failed: {e.code()}: {e.details()}", file=sys.stderr)
        sys.exit(1)
