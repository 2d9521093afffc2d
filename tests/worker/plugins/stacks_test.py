#!/usr/bin/env python3
"""Tests of worker/plugins/stacks.py against fake package trees.

Each case writes fake serving-stack packages (and their dist-info) into a
temporary directory and runs the probe CLI in a fresh interpreter that sees
that directory and no site-packages, so the real machine's packages never
leak in.
"""

from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import textwrap
import unittest

sys.dont_write_bytecode = True
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[3]
STACKS = SOURCE_DIR / "worker/plugins/stacks.py"


def load_stacks():
    spec = importlib.util.spec_from_file_location("moetune_stacks", STACKS)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


stacks = load_stacks()

FUSED_MOE = """
def cutlass_fused_moe(*args, **kwargs):
    raise NotImplementedError
def trtllm_fp4_block_scale_moe(*args, **kwargs):
    raise NotImplementedError
"""


class FakeTree:
    """A directory of fake packages, first (and alone) on the probe's path."""

    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="moetune_stacks_")
        self.root = pathlib.Path(self._dir.name)

    def close(self) -> None:
        self._dir.cleanup()

    def module(self, dotted: str, source: str = "") -> None:
        """Writes package `dotted` (every parent a package too)."""
        path = self.root
        for part in dotted.split("."):
            path = path / part
            path.mkdir(exist_ok=True)
            init = path / "__init__.py"
            if not init.exists():
                init.write_text("")
        (path / "__init__.py").write_text(textwrap.dedent(source))

    def distribution(self, name: str, version: str) -> None:
        """A dist-info so that importlib.metadata.version(name) answers."""
        info = self.root / f"{name.replace('-', '_')}-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")

    def flashinfer(self, fused_moe: str = FUSED_MOE, cute_dsl: bool = False):
        self.module("flashinfer", '__version__ = "0.6.3"\n')
        self.distribution("flashinfer-python", "0.6.3")
        self.module("flashinfer.fused_moe", fused_moe)
        if cute_dsl:
            self.module("flashinfer.cute_dsl.blockscaled_gemm",
                        "def grouped_gemm_nt_masked(*a, **k): pass\n")

    def cutlass_dsl(self) -> None:
        # The dist-info's version wins over the module's own __version__.
        self.module("cutlass", '__version__ = "0.0-module"\n')
        self.module("cutlass.cute")
        self.distribution("nvidia-cutlass-dsl", "4.2.1")

    def probe(self, device: str) -> dict[str, dict]:
        """The CLI's JSON lines, by backend; fails on any other stdout."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("PYTHON")}
        env["PYTHONPATH"] = str(self.root)
        run = subprocess.run(
            [sys.executable, "-S", "-B", str(STACKS), "--device", device],
            env=env, capture_output=True, text=True, timeout=120, check=False)
        if run.returncode != 0:
            raise AssertionError(f"probe exited {run.returncode}: {run.stderr}")
        results = [json.loads(line) for line in run.stdout.splitlines()]
        return {r["backend"]: r for r in results}


class StacksProbeTest(unittest.TestCase):

    def setUp(self) -> None:
        self.tree = FakeTree()
        self.addCleanup(self.tree.close)

    def test_missing_submodule_names_the_package_version_and_module(self):
        self.tree.flashinfer(cute_dsl=False)
        self.tree.cutlass_dsl()
        r = self.tree.probe("sm_100a")["flashinfer_cute_dsl_moe"]
        self.assertFalse(r["available"])
        self.assertEqual(
            r["reason"],
            "flashinfer 0.6.3: module flashinfer.cute_dsl not found")
        self.assertEqual(r["versions"],
                         {"flashinfer": "0.6.3", "cutlass": "4.2.1"})

    def test_absent_stack_is_not_installed(self):
        results = self.tree.probe("sm_90a")
        self.assertEqual(results["vllm_marlin_fp4_moe"]["reason"],
                         "vllm: not installed")
        self.assertEqual(results["vllm_marlin_fp4_moe"]["versions"], {})
        self.assertEqual(results["trtllm_gen_moe"]["reason"],
                         "tensorrt_llm: not installed")
        # Every runner is reported, none available, each with a reason.
        self.assertEqual(sorted(results),
                         sorted(r.name for r in stacks.RUNNERS))
        for r in results.values():
            self.assertFalse(r["available"])
            self.assertTrue(r["reason"].endswith(": not installed"), r)

    def test_architecture_refusal_when_everything_imports(self):
        self.tree.flashinfer(cute_dsl=True)
        self.tree.cutlass_dsl()
        results = self.tree.probe("sm_90a")
        self.assertEqual(results["flashinfer_trtllm_fp4_moe"]["reason"],
                         "needs sm_100a or sm_103a, device is sm_90a")
        self.assertEqual(results["flashinfer_cute_dsl_moe"]["reason"],
                         "needs sm_100a or sm_103a, device is sm_90a")
        self.assertEqual(results["flashinfer_cutlass_moe"]["reason"],
                         "needs sm_100+, device is sm_90a")
        self.assertFalse(results["flashinfer_cutlass_moe"]["available"])
        self.assertEqual(results["flashinfer_cutlass_moe"]["versions"],
                         {"flashinfer": "0.6.3"})

    def test_available_when_everything_imports_and_the_arch_fits(self):
        self.tree.flashinfer(cute_dsl=True)
        self.tree.cutlass_dsl()
        results = self.tree.probe("sm_100a")
        for name in ("flashinfer_cutlass_moe", "flashinfer_trtllm_fp4_moe",
                     "flashinfer_cute_dsl_moe"):
            self.assertTrue(results[name]["available"], results[name])
            self.assertEqual(results[name]["reason"], "")
        # sm_120 (RTX Blackwell) has FP4 tensor cores but not tcgen05.
        results = self.tree.probe("sm_120")
        self.assertTrue(results["flashinfer_cutlass_moe"]["available"])
        self.assertEqual(results["flashinfer_trtllm_fp4_moe"]["reason"],
                         "needs sm_100a or sm_103a, device is sm_120a")

    def test_version_falls_back_to_the_module_attribute(self):
        self.tree.module("vllm", '__version__ = "0.11.0"\n')
        self.tree.module("vllm.model_executor.layers.fused_moe",
                         "def fused_experts(*a, **k): pass\n")
        results = self.tree.probe("9.0")
        triton = results["vllm_triton_fused_moe"]
        self.assertTrue(triton["available"], triton)
        self.assertEqual(triton["versions"], {"vllm": "0.11.0"})
        self.assertEqual(
            results["vllm_marlin_fp4_moe"]["reason"],
            "vllm 0.11.0: module "
            "vllm.model_executor.layers.quantization not found")

    def test_missing_symbol_is_named(self):
        self.tree.flashinfer(fused_moe="def cutlass_fused_moe(): pass\n")
        r = self.tree.probe("sm_100a")["flashinfer_trtllm_fp4_moe"]
        self.assertEqual(
            r["reason"],
            "flashinfer 0.6.3: flashinfer.fused_moe has no "
            "trtllm_fp4_block_scale_moe")

    def test_package_whose_import_raises_is_reported_not_fatal(self):
        self.tree.module("sglang",
                         'raise RuntimeError("CUDA driver too old")\n')
        self.tree.module("vllm", "import torch_that_is_not_here\n")
        results = self.tree.probe("sm_100a")
        self.assertEqual(
            results["sglang_triton"]["reason"],
            "sglang: import failed: RuntimeError: CUDA driver too old")
        self.assertEqual(
            results["vllm_triton_fused_moe"]["reason"],
            "vllm: import failed: ModuleNotFoundError: "
            "No module named 'torch_that_is_not_here'")

    def test_submodule_whose_import_raises_names_the_error(self):
        # TensorRT-LLM also prints a banner on import, which must not reach
        # the JSON lines.
        self.tree.module(
            "tensorrt_llm",
            'import os\nprint("[TensorRT-LLM] version 1.0.0")\n'
            'os.write(1, b"raw banner\\n")\n__version__ = "1.0.0"\n')
        self.tree.module(
            "tensorrt_llm._torch.modules.fused_moe.fused_moe_cutlass",
            'raise ImportError('
            '"libnvinfer.so.10: cannot open shared object file")\n')
        self.tree.module(
            "tensorrt_llm._torch.modules.fused_moe.fused_moe_trtllm_gen",
            "raise SystemExit(3)\n")
        results = self.tree.probe("sm_100a")
        self.assertEqual(
            results["trtllm_cutlass_moe"]["reason"],
            "tensorrt_llm 1.0.0: importing "
            "tensorrt_llm._torch.modules.fused_moe.fused_moe_cutlass failed: "
            "ImportError: libnvinfer.so.10: cannot open shared object file")
        self.assertEqual(
            results["trtllm_gen_moe"]["reason"],
            "tensorrt_llm 1.0.0: importing "
            "tensorrt_llm._torch.modules.fused_moe.fused_moe_trtllm_gen "
            "failed: SystemExit: 3")
        self.assertEqual(results["trtllm_gen_moe"]["knobs"],
                         ["moe_config.backend=TRTLLM"])

    def test_unknown_device_refuses_with_the_architecture_it_needs(self):
        self.tree.flashinfer()
        r = self.tree.probe("unknown")["flashinfer_cutlass_moe"]
        self.assertEqual(r["reason"], "needs sm_100+, device is unknown")


class CapabilityTest(unittest.TestCase):

    def test_parses_every_spelling(self):
        self.assertEqual(stacks.parse_capability("sm_90a"), (9, 0))
        self.assertEqual(stacks.parse_capability("sm_120"), (12, 0))
        self.assertEqual(stacks.parse_capability("sm_103a"), (10, 3))
        self.assertEqual(stacks.parse_capability("8.6"), (8, 6))
        self.assertEqual(stacks.parse_capability((10, 0)), (10, 0))
        self.assertIsNone(stacks.parse_capability("unknown"))
        self.assertIsNone(stacks.parse_capability(None))

    def test_arch_specific_is_exact_and_plus_is_at_least(self):
        self.assertTrue(stacks.arch_fits("sm_100a", (10, 0)))
        self.assertFalse(stacks.arch_fits("sm_100a", (10, 3)))
        self.assertFalse(stacks.arch_fits("sm_100a", (12, 0)))
        self.assertTrue(stacks.arch_fits("sm_100+", (12, 0)))
        self.assertFalse(stacks.arch_fits("sm_100+", (9, 0)))
        self.assertTrue(stacks.arch_fits("sm_80+", (9, 0)))
        self.assertEqual(stacks.capability_text((9, 0)), "sm_90a")
        self.assertEqual(stacks.capability_text((8, 0)), "sm_80")

    def test_every_runner_is_well_formed(self):
        names = [r.name for r in stacks.RUNNERS]
        self.assertEqual(len(names), len(set(names)))
        for runner in stacks.RUNNERS:
            self.assertTrue(runner.why, runner.name)
            self.assertTrue(runner.archs, runner.name)
            for arch in runner.archs:
                stacks.arch_fits(arch, (9, 0))  # raises if malformed
            packages = {p.module for p in runner.packages}
            for need in runner.needs:
                self.assertIn(need.split(".")[0], packages, runner.name)


if __name__ == "__main__":
    unittest.main()
