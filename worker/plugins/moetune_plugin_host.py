#!/usr/bin/env python3
"""moetune's Python plugin host: serves the out-of-process backend protocol
(proto/plugin.proto, version 1; docs/plugins.md) on stdin / stdout for the
Python backends of moetune_plugins.backends (numpy_reference,
torch_grouped_bf16, torch_grouped_fp8, and one backend per serving-stack
runner of stacks.RUNNERS, probed by stacks.py).

A worker starts it as a plugin (moetune-worker --plugins=FILE) and sends
framed requests: hello, probe, run. A run's inputs come from moetune's model
library (libmoetune_model.so, through ctypes); the host prepares the
backend once per workload, runs it once for the output, then warms up and
times it. Anything that goes wrong in a request is answered with an Error
reply; the host itself keeps serving.
"""
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from moetune_plugins import protocol  # noqa: E402

HOST_NAME = "moetune_plugin_host"
HOST_VERSION = "1"

# Further sources of ComponentVersion entries for every probe: callables
# returning [{"name": ..., "version": ...}].
VERSION_SOURCES = []


def _backends():
    from moetune_plugins.backends import BACKENDS
    return BACKENDS


class Host:
    def __init__(self):
        self.libraries = {}
        self.prepared = None  # (key, inputs, state) of the last workload

    def hello(self, request):
        return protocol.reply("hello", {
            "plugin_name": HOST_NAME, "plugin_version": HOST_VERSION,
            "backends": sorted(_backends())})

    def backend(self, name):
        backends = _backends()
        if name not in backends:
            raise LookupError(f"backend '{name}' is not served here; "
                              f"allowed: {', '.join(sorted(backends))}")
        return backends[name]

    def probe(self, request):
        reply = self.backend(request.get("backend", "")).probe(
            request.get("device", {}))
        for source in VERSION_SOURCES:
            reply.setdefault("versions", []).extend(source())
        return protocol.reply("probe", reply)

    def _prepare(self, backend, request):
        from moetune_plugins import model_lib
        inputs_spec = request.get("inputs", {})
        key = repr((backend.name, sorted(inputs_spec.items()),
                    request.get("tile"), request.get("cuda_graph", False),
                    request.get("device")))
        if self.prepared is None or self.prepared[0] != key:
            self.prepared = None  # free the previous workload first
            path = inputs_spec.get("model_library", "")
            if path not in self.libraries:
                self.libraries[path] = model_lib.load(path)
            inputs = model_lib.MoeInputs(self.libraries[path], inputs_spec)
            state = backend.prepare(inputs, request.get("tile", {}),
                                    request.get("device", {}),
                                    request.get("cuda_graph", False))
            self.prepared = (key, inputs, state)
        return self.prepared[1], self.prepared[2]

    def run(self, request):
        backend = self.backend(request.get("backend", ""))
        refuse = getattr(backend, "refuse_run", None)
        refusal = refuse(request.get("device", {})) if refuse else ""
        if refusal:
            raise RuntimeError(refusal)  # an UNAVAILABLE error reply
        start = time.monotonic()
        inputs, state = self._prepare(backend, request)
        output = backend.run(state)
        checked = time.monotonic()
        samples = backend.time(state, int(request.get("warmup_iterations", 0)),
                               int(request.get("iterations", 0)))
        return protocol.reply("run", {
            "samples_us": samples,
            "output": protocol.float32_bytes(output),
            "output_shape": [str(n) for n in output.shape],
            "check_s": checked - start,
            "timed_s": time.monotonic() - checked})

    def answer(self, message):
        version = message.get("protocol_version", 0)
        if version != protocol.PROTOCOL_VERSION:
            return protocol.error(
                "INVALID_ARGUMENT", f"protocol version {version}; this host "
                f"speaks {protocol.PROTOCOL_VERSION}")
        for kind in ("hello", "probe", "run"):
            if kind in message:
                return getattr(self, kind)(message[kind])
        return protocol.error("INVALID_ARGUMENT",
                              "a request needs one of hello, probe, run")


def _error_reply(exc):
    code = {LookupError: "INVALID_ARGUMENT", ValueError: "INVALID_ARGUMENT",
            RuntimeError: "UNAVAILABLE"}
    for kind, name in code.items():
        if isinstance(exc, kind):
            return protocol.error(name, str(exc))
    return protocol.error("INTERNAL", f"{type(exc).__name__}: {exc}")


def main():
    host = Host()
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # a backend's print must not corrupt the frames
    while True:
        payload = protocol.read_frame(stdin)
        if payload is None:
            return 0
        try:
            reply = host.answer(protocol.decode(payload))
        except Exception as exc:  # one request's failure, never the host's
            traceback.print_exc(file=sys.stderr)
            reply = _error_reply(exc)
        protocol.write_frame(stdout, protocol.encode(reply))


if __name__ == "__main__":
    sys.exit(main())
