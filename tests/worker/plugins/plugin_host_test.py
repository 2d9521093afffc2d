"""The Python plugin host (worker/plugins): libmoetune_model's inputs through
ctypes, the numpy backend against the reference, the framed protocol, and
the torch backends' probes (their runs only where torch and a GPU are)."""
import io
import json
import os
import struct
import subprocess
import sys
import unittest

PLUGINS = os.environ["MOETUNE_PLUGINS_DIR"]
sys.path.insert(0, PLUGINS)

import numpy as np  # noqa: E402

from moetune_plugins import model_lib, protocol  # noqa: E402
from moetune_plugins.backends import BACKENDS, stack_runners  # noqa: E402
from stacks_test import FakeTree  # noqa: E402

try:
    import torch  # noqa: F401
    HAS_CUDA_TORCH = torch.cuda.is_available()
except ImportError:
    HAS_CUDA_TORCH = False

TINY = {"preset": "tiny", "seed": "5", "batch": 3, "layer": -1,
        "tp": 1, "ep": 1, "rank": 0}


def relative_error(out, ref):
    return np.linalg.norm(out - ref) / np.linalg.norm(ref)


class ModelLibraryTest(unittest.TestCase):
    def setUp(self):
        self.lib = model_lib.load(os.environ["MOETUNE_MODEL_LIBRARY"])

    def test_dims_and_routing(self):
        inputs = model_lib.MoeInputs(self.lib, TINY)
        self.assertEqual(inputs.dims["hidden"], 256)
        experts, weights = inputs.routing()
        self.assertEqual(experts.shape, (3, inputs.dims["top_k"]))
        # The routed weights sum to GLM-5's routed_scaling, 2.5.
        np.testing.assert_allclose(weights.sum(axis=1), 2.5, rtol=1e-5)

    def test_bad_spec_names_the_field(self):
        with self.assertRaisesRegex(ValueError, "allowed: glm5, tiny"):
            model_lib.MoeInputs(self.lib, dict(TINY, preset="nope"))
        with self.assertRaisesRegex(ValueError, "shard.rank"):
            model_lib.MoeInputs(self.lib, dict(TINY, rank=4))

    def test_numpy_backend_matches_the_reference(self):
        for spec in (TINY, dict(TINY, tp=2, ep=2, rank=3),
                     dict(TINY, routing={"distribution": "skewed",
                                         "skew": 1.5})):
            inputs = model_lib.MoeInputs(self.lib, spec)
            backend = BACKENDS["numpy_reference"]
            out = backend.run(backend.prepare(inputs, {}, {}, False))
            self.assertLess(relative_error(out, inputs.reference()), 1e-6)

    def test_other_ranks_experts_are_refused(self):
        inputs = model_lib.MoeInputs(self.lib, dict(TINY, ep=2, rank=1))
        with self.assertRaisesRegex(ValueError, "not owned"):
            inputs.expert(0)


class HostProtocolTest(unittest.TestCase):
    def exchange(self, *requests):
        payloads = [protocol.encode({"protocol_version": 1, **r})
                    for r in requests]
        framed = b"".join(struct.pack("<I", len(p)) + p for p in payloads)
        done = subprocess.run(
            [sys.executable, os.path.join(PLUGINS, "moetune_plugin_host.py")],
            input=framed, capture_output=True, timeout=120, check=True)
        replies, stream = [], io.BytesIO(done.stdout)
        while (payload := protocol.read_frame(stream)) is not None:
            replies.append(json.loads(payload))
        return replies

    def test_hello_probe_run(self):
        inputs = dict(TINY, model_library=os.environ["MOETUNE_MODEL_LIBRARY"])
        hello, probe, run, bad = self.exchange(
            {"hello": {"backend": "numpy_reference"}},
            {"probe": {"backend": "numpy_reference", "device": {}}},
            {"run": {"backend": "numpy_reference", "inputs": inputs,
                     "iterations": 2}},
            {"run": {"backend": "nope"}})
        self.assertIn("torch_grouped_fp8", hello["hello"]["backends"])
        self.assertTrue(probe["probe"]["available"])
        self.assertEqual(len(run["run"]["samples_us"]), 2)
        self.assertEqual(run["run"]["output_shape"], ["3", "256"])
        self.assertEqual(bad["error"]["code"], "INVALID_ARGUMENT")

    def test_another_version_is_refused(self):
        (reply,) = self.exchange({"protocol_version": 2, "hello": {}})
        self.assertEqual(reply["error"]["code"], "INVALID_ARGUMENT")
        self.assertIn("speaks 1", reply["error"]["message"])


class TorchBackendsTest(unittest.TestCase):
    def test_probes_say_why_not(self):
        for name in ("torch_grouped_bf16", "torch_grouped_fp8"):
            probe = BACKENDS[name].probe({"is_gpu": False, "ordinal": -1})
            self.assertFalse(probe["available"])
            self.assertTrue(probe["reason"])
            self.assertTrue(probe["error_bound_why"])
            self.assertEqual(probe["placement"], "GPU")

    @unittest.skipIf(HAS_CUDA_TORCH, "torch is installed")
    def test_without_torch_the_probe_names_it(self):
        probe = BACKENDS["torch_grouped_bf16"].probe({"is_gpu": True,
                                                      "ordinal": 0})
        self.assertEqual(probe["reason"], "not installed: torch")

    @unittest.skipUnless(HAS_CUDA_TORCH, "needs torch with a CUDA device")
    def test_torch_backends_within_their_bounds(self):
        lib = model_lib.load(os.environ["MOETUNE_MODEL_LIBRARY"])
        inputs = model_lib.MoeInputs(lib, dict(TINY, batch=8))
        for name in ("torch_grouped_bf16", "torch_grouped_fp8"):
            backend = BACKENDS[name]
            device = {"is_gpu": True, "ordinal": 0}
            if not backend.probe(device)["available"]:
                continue
            for graph in (False, True):
                out = backend.run(backend.prepare(inputs, {}, device, graph))
                self.assertLess(relative_error(out, inputs.reference()),
                                backend.probe(device)["error_bound"], name)


def run_host(requests, pythonpath):
    """The host's replies to `requests`, with `pythonpath` first on its path."""
    payloads = [protocol.encode({"protocol_version": 1, **r})
                for r in requests]
    env = dict(os.environ, PYTHONPATH=pythonpath)
    done = subprocess.run(
        [sys.executable, "-B", os.path.join(PLUGINS, "moetune_plugin_host.py")],
        input=b"".join(struct.pack("<I", len(p)) + p for p in payloads),
        env=env, capture_output=True, timeout=120, check=True)
    replies, stream = [], io.BytesIO(done.stdout)
    while (payload := protocol.read_frame(stream)) is not None:
        replies.append(json.loads(payload))
    return replies


class StackRunnersTest(unittest.TestCase):
    """The serving stacks' runners served by the host, probed by stacks.py
    against fake package trees (stacks_test.FakeTree) on the host's path."""

    def setUp(self):
        self.tree = FakeTree()
        self.addCleanup(self.tree.close)

    def test_hello_lists_every_runner(self):
        (hello,) = run_host([{"hello": {"backend": "numpy_reference"}}],
                            str(self.tree.root))
        names = [r.name for r in stack_runners.load_stacks().RUNNERS]
        self.assertEqual(len(names), 12)
        for name in names:
            self.assertIn(name, hello["hello"]["backends"])

    def test_probe_is_the_stacks_probe_and_a_run_is_unavailable(self):
        self.tree.flashinfer(cute_dsl=False)
        self.tree.cutlass_dsl()
        inputs = dict(TINY, model_library=os.environ["MOETUNE_MODEL_LIBRARY"])
        cpu = {"is_gpu": False, "ordinal": -1}
        probe, gpu_runner, run = run_host(
            [{"probe": {"backend": "flashinfer_cute_dsl_moe", "device": cpu}},
             {"probe": {"backend": "flashinfer_cutlass_moe", "device": cpu}},
             {"run": {"backend": "flashinfer_cute_dsl_moe", "inputs": inputs,
                      "iterations": 2, "device": cpu}}],
            str(self.tree.root))
        self.assertFalse(probe["probe"]["available"])
        self.assertEqual(
            probe["probe"]["reason"],
            "flashinfer 0.6.3: module flashinfer.cute_dsl not found")
        self.assertEqual(probe["probe"]["versions"],
                         [{"name": "flashinfer", "version": "0.6.3"},
                          {"name": "cutlass", "version": "4.2.1"}])
        self.assertEqual(probe["probe"]["placement"], "GPU")
        self.assertEqual(
            gpu_runner["probe"]["reason"],
            "flashinfer_cutlass_moe: GPU runner (needs sm_100+, device is "
            "unknown); this worker runs on the CPU")
        self.assertEqual(run["error"]["code"], "UNAVAILABLE")
        self.assertEqual(
            run["error"]["message"],
            "flashinfer_cute_dsl_moe is unavailable: flashinfer 0.6.3: "
            "module flashinfer.cute_dsl not found")

    def test_an_available_runner_without_an_adapter_says_so(self):
        self.tree.flashinfer()
        script = (
            "import json, sys; sys.path.insert(0, %r)\n"
            "from moetune_plugins.backends import stack_runners as s\n"
            "s._capability = lambda device: 'sm_100a'\n"
            "r = [b for b in s.runners() if b.name == "
            "'flashinfer_cutlass_moe'][0]\n"
            "print(json.dumps(r.probe({'is_gpu': True, 'ordinal': 0})))\n"
            % PLUGINS)
        done = subprocess.run(
            [sys.executable, "-B", "-c", script], capture_output=True,
            text=True, timeout=120, check=True,
            env=dict(os.environ, PYTHONPATH=str(self.tree.root)))
        probe = json.loads(done.stdout)
        self.assertFalse(probe["available"])
        self.assertEqual(
            probe["reason"],
            "flashinfer_cutlass_moe: no run adapter in the plugin host yet")
        self.assertEqual(probe["versions"],
                         [{"name": "flashinfer", "version": "0.6.3"}])

    def test_the_deployed_list_names_every_backend_of_the_host(self):
        # deploy/plugins.json, as bundle.sh places it beside plugins/.
        path = os.path.join(PLUGINS, "..", "..", "deploy", "plugins.json")
        with open(path, encoding="utf-8") as f:
            entries = json.load(f)["plugins"]
        self.assertEqual([e["backend"] for e in entries], list(BACKENDS))
        for entry in entries:
            self.assertEqual(entry["command"],
                             ["plugins/moetune_plugin_host.py"])
        self.assertTrue(os.access(
            os.path.join(PLUGINS, "moetune_plugin_host.py"), os.X_OK))


if __name__ == "__main__":
    unittest.main()
