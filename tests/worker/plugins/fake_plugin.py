#!/usr/bin/env python3
"""A misbehaving plugin for plugin_backend_test: speaks the plugin protocol
(proto/plugin.proto) for backend "fake" on tiny's hidden size (256), and
misbehaves as its first argument says:
  zeros        answers every request; its output is all zeros (wrong values)
  crash        aborts on a run request
  hang         sleeps on a run request
  garbage      writes bytes that are no frame on a run request
  not_json     answers a run request with a frame that is not JSON
  bad_version  answers every request with protocol version 99
  wrong_shape  answers a run request with an output of shape [batch, 255]
  unavailable  probes unavailable ("not installed: fakelib")
Pure Python (no numpy)."""
import base64
import json
import os
import struct
import sys
import time

MODE = sys.argv[1] if len(sys.argv) > 1 else "zeros"
HIDDEN = 256


def read_frame():
    header = sys.stdin.buffer.read(4)
    if len(header) < 4:
        return None
    (n,) = struct.unpack("<I", header)
    return sys.stdin.buffer.read(n)


def write(payload):
    sys.stdout.buffer.write(struct.pack("<I", len(payload)) + payload)
    sys.stdout.buffer.flush()


def run_reply(run):
    batch = run["inputs"]["batch"]
    hidden = HIDDEN - 1 if MODE == "wrong_shape" else HIDDEN
    output = base64.b64encode(b"\0" * (4 * batch * hidden)).decode()
    return {"run": {"samples_us": [5.0] * run.get("iterations", 0),
                    "output": output, "output_shape": [batch, hidden]}}


def answer(request):
    if "hello" in request:
        return {"hello": {"plugin_name": "fake", "backends": ["fake"]}}
    if "probe" in request:
        available = MODE != "unavailable"
        return {"probe": {"available": available,
                          "reason": "" if available else "not installed: fakelib",
                          "versions": [{"name": "fakelib", "version": "1.2"}],
                          "tiles": [{"block_n": 8, "block_k": 64}],
                          "error_bound": 5.0, "error_bound_why": "claims a lot"}}
    if MODE == "crash":
        os.abort()
    if MODE == "hang":
        time.sleep(600)
    if MODE == "garbage":
        sys.stdout.buffer.write(b"this is not a frame at all\n")
        sys.stdout.buffer.flush()
        time.sleep(600)
    if MODE == "not_json":
        write(b"{not json")
        return None
    return run_reply(request["run"])


def main():
    while True:
        payload = read_frame()
        if payload is None:
            return 0
        reply = answer(json.loads(payload))
        if reply is None:
            continue
        reply["protocol_version"] = 99 if MODE == "bad_version" else 1
        write(json.dumps(reply).encode())


if __name__ == "__main__":
    sys.exit(main())
