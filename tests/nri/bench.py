#!/usr/bin/env python3
"""The NRI bench's CRI client (tests/nri/main.rs, bench_nri_latency_and_memory):
times CRI calls inside one process, so Python's start-up is not measured.

    bench.py --socket PATH start  < {"pod_sandbox_id", "config", "sandbox_config"}
        CreateContainer + StartContainer, timed; then StopContainer +
        RemoveContainer (not timed). Prints {"seconds": S}.
    bench.py --socket PATH churn N < the same
        N times: CreateContainer, StartContainer, StopContainer,
        RemoveContainer. Prints {"count": N, "seconds": S}.
    bench.py --socket PATH pods N < the same, plus "runtime_handler"
        N pods, one after the other: RunPodSandbox (the sandbox config with
        the name, uid and cgroup made unique), then the container as in
        churn, then StopPodSandbox + RemovePodSandbox. Prints
        {"count": N, "seconds": S}.
    bench.py --socket PATH burst N < the same, plus "runtime_handler"
        N pods at once, as kubelet places a batch: N threads wait on one
        barrier, then each makes its pod (RunPodSandbox, the sandbox config
        made unique as in pods) and its container (CreateContainer,
        StartContainer), each call timed; then every container and pod is
        stopped and removed, N at once, untimed. Prints {"pods": [{"run":
        S, "create": S, "start": S, "total": S}, ...], "seconds": S} (the
        burst's wall time, from the barrier to the last StartContainer).
        Any call failing fails the run.

Uses the stubs of the `container-runtime-interface-api` package, as
tests/cri/cri.py does.
"""

import argparse
import json
import sys
import threading
import time

import grpc
from google.protobuf import json_format

from cri_api.v1 import api_pb2, api_pb2_grpc


def one(stub, request, timed):
    t0 = time.perf_counter()
    created = stub.CreateContainer(request, timeout=60)
    stub.StartContainer(api_pb2.StartContainerRequest(container_id=created.container_id), timeout=60)
    seconds = time.perf_counter() - t0
    stub.StopContainer(api_pb2.StopContainerRequest(container_id=created.container_id, timeout=0), timeout=60)
    stub.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=created.container_id), timeout=60)
    return seconds if timed else 0.0


def pods(stub, request, count, handler):
    base = json_format.MessageToDict(request.sandbox_config, preserving_proto_field_name=True)
    for i in range(count):
        sandbox = unique_sandbox(base, i)
        pod = stub.RunPodSandbox(api_pb2.RunPodSandboxRequest(config=sandbox, runtime_handler=handler), timeout=60)
        request.pod_sandbox_id = pod.pod_sandbox_id
        request.sandbox_config.CopyFrom(sandbox)
        one(stub, request, False)
        stub.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=pod.pod_sandbox_id), timeout=60)
        stub.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=pod.pod_sandbox_id), timeout=60)


def unique_sandbox(base, i):
    cfg = json.loads(json.dumps(base))
    uid = f"{cfg['metadata']['uid']}-{i}"
    cfg["metadata"]["name"] = f"{cfg['metadata']['name']}-{i}"
    cfg["metadata"]["uid"] = uid
    cfg["labels"]["io.kubernetes.pod.uid"] = uid
    cfg["linux"]["cgroup_parent"] = f"{cfg['linux']['cgroup_parent']}-{i}"
    return json_format.ParseDict(cfg, api_pb2.PodSandboxConfig())


def burst(stub, request, count, handler, mix=None):
    """Places `count` pods at once. With `mix` (a list of {"runtime_handler",
    "image"}), pod i takes mix[i % len(mix)]'s handler and image, and its
    result says which ("arm": the index), so arms share one burst's load."""
    base = json_format.MessageToDict(request.sandbox_config, preserving_proto_field_name=True)
    sandboxes = [unique_sandbox(base, f"b{i}") for i in range(count)]
    barrier = threading.Barrier(count + 1)
    results = [None] * count
    made = [[None, None] for _ in range(count)]  # pod id, container id

    def one_pod(i):
        try:
            req = api_pb2.CreateContainerRequest()
            req.CopyFrom(request)
            req.sandbox_config.CopyFrom(sandboxes[i])
            pod_handler = handler
            if mix:
                arm = mix[i % len(mix)]
                pod_handler = arm["runtime_handler"]
                req.config.image.image = arm["image"]
            barrier.wait()
            t0 = time.perf_counter()
            pod = stub.RunPodSandbox(
                api_pb2.RunPodSandboxRequest(config=sandboxes[i], runtime_handler=pod_handler), timeout=300
            )
            made[i][0] = req.pod_sandbox_id = pod.pod_sandbox_id
            t1 = time.perf_counter()
            created = stub.CreateContainer(req, timeout=300)
            made[i][1] = created.container_id
            t2 = time.perf_counter()
            stub.StartContainer(api_pb2.StartContainerRequest(container_id=created.container_id), timeout=300)
            t3 = time.perf_counter()
            results[i] = {"run": t1 - t0, "create": t2 - t1, "start": t3 - t2, "total": t3 - t0, "end": t3}
            if mix:
                results[i]["arm"] = i % len(mix)
        except Exception as e:  # noqa: BLE001 (reported below, after the teardown)
            results[i] = {"error": f"pod {i}: {e}"}

    def teardown(i):
        pod, ctr = made[i]
        if ctr:
            stub.StopContainer(api_pb2.StopContainerRequest(container_id=ctr, timeout=0), timeout=300)
            stub.RemoveContainer(api_pb2.RemoveContainerRequest(container_id=ctr), timeout=300)
        if pod:
            stub.StopPodSandbox(api_pb2.StopPodSandboxRequest(pod_sandbox_id=pod), timeout=300)
            stub.RemovePodSandbox(api_pb2.RemovePodSandboxRequest(pod_sandbox_id=pod), timeout=300)

    threads = [threading.Thread(target=one_pod, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    barrier.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    ends = [r["end"] for r in results if "end" in r]
    seconds = (max(ends) if ends else time.perf_counter()) - t0
    threads = [threading.Thread(target=teardown, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    errors = [r["error"] for r in results if "error" in r]
    if errors:
        print("bench.py burst: " + "; ".join(errors), file=sys.stderr)
        return None
    for r in results:
        del r["end"]
    return {"pods": results, "seconds": seconds}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--socket", required=True)
    ap.add_argument("mode", choices=["start", "churn", "pods", "burst"])
    ap.add_argument("count", nargs="?", type=int, default=1)
    args = ap.parse_args()
    stub = api_pb2_grpc.RuntimeServiceStub(grpc.insecure_channel("unix://" + args.socket))
    given = json.load(sys.stdin)
    handler = given.pop("runtime_handler", "")
    mix = given.pop("mix", None)
    request = json_format.ParseDict(given, api_pb2.CreateContainerRequest())
    if args.mode == "burst":
        out = burst(stub, request, args.count, handler, mix)
        if out is None:
            return 1
        print(json.dumps(out))
        return 0
    if args.mode == "pods":
        t0 = time.perf_counter()
        pods(stub, request, args.count, handler)
        print(json.dumps({"count": args.count, "seconds": time.perf_counter() - t0}))
        return 0
    if args.mode == "start":
        print(json.dumps({"seconds": one(stub, request, True)}))
        return 0
    t0 = time.perf_counter()
    base = request.config.metadata.name
    for i in range(args.count):
        request.config.metadata.name = f"{base}-{i}"
        one(stub, request, False)
    print(json.dumps({"count": args.count, "seconds": time.perf_counter() - t0}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
