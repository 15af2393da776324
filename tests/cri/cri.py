#!/usr/bin/env python3
"""A CRI client for the tests: one call of containerd's (or any CRI
runtime's) `runtime.v1.RuntimeService` / `runtime.v1.ImageService` over its
unix socket, as kubelet makes it.

    cri.py --socket PATH [--timeout SECONDS] METHOD < REQUEST.json

METHOD is the RPC's name (RunPodSandbox, CreateContainer, StartContainer,
ExecSync, ContainerStatus, PodSandboxStatus, StopContainer, RemoveContainer,
StopPodSandbox, RemovePodSandbox, Version, ListImages, ImageStatus, ...).
REQUEST is the request message in the proto's JSON mapping (field names as
in api.proto, e.g. {"config": {"metadata": {"name": "p"}}}), empty for {}.

Prints exactly one JSON line on stdout:
    {"ok": true, "response": {...}}                       exit 0
    {"ok": false, "code": "NOT_FOUND", "details": "..."}  exit 1 (a gRPC error)
Bad usage or a request that does not parse: a message on stderr, exit 2.

The response uses the proto field names, with fields at their zero value
included; ExecSync's stdout and stderr are decoded as UTF-8 text (invalid
bytes replaced) instead of base64.

The stubs are those of the `container-runtime-interface-api` package
(generated from the CRI api.proto); tests/env/venv.sh installs it.
"""

import argparse
import json
import sys

import grpc
from google.protobuf import json_format

from cri_api.v1 import api_pb2, api_pb2_grpc


def to_dict(message):
    try:
        return json_format.MessageToDict(
            message, preserving_proto_field_name=True, always_print_fields_with_no_presence=True
        )
    except TypeError:  # protobuf < 5.26
        return json_format.MessageToDict(
            message, preserving_proto_field_name=True, including_default_value_fields=True
        )


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True, help="the runtime's unix socket")
    ap.add_argument("--timeout", type=float, default=60.0, help="deadline of the call in seconds")
    ap.add_argument("method", help="the RPC, e.g. RunPodSandbox")
    args = ap.parse_args()

    channel = grpc.insecure_channel("unix://" + args.socket)
    stubs = [api_pb2_grpc.RuntimeServiceStub(channel), api_pb2_grpc.ImageServiceStub(channel)]
    call = next((getattr(s, args.method) for s in stubs if hasattr(s, args.method)), None)
    request_type = getattr(api_pb2, args.method + "Request", None)
    if call is None or request_type is None:
        print(f"cri.py: no such CRI method: {args.method}", file=sys.stderr)
        return 2
    text = sys.stdin.read()
    try:
        request = json_format.ParseDict(json.loads(text) if text.strip() else {}, request_type())
    except (ValueError, json_format.ParseError) as e:
        print(f"cri.py: {args.method} request: {e}", file=sys.stderr)
        return 2
    try:
        response = call(request, timeout=args.timeout)
    except grpc.RpcError as e:
        print(json.dumps({"ok": False, "code": e.code().name, "details": e.details()}))
        return 1
    out = to_dict(response)
    if args.method == "ExecSync":
        out["stdout"] = response.stdout.decode("utf-8", "replace")
        out["stderr"] = response.stderr.decode("utf-8", "replace")
    print(json.dumps({"ok": True, "response": out}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
