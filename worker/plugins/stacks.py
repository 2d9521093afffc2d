#!/usr/bin/env python3
"""Probes of the serving stacks' MoE runners (docs/plugins.md).

Whether FlashInfer, vLLM, SGLang and TensorRT-LLM can run each of their MoE
runners on this machine, and why not: the packages import, their versions,
every module and symbol the runner calls, and the architecture it needs
against the device's compute capability. A probe result is a dict:

  {"backend": str, "available": bool, "reason": str,
   "versions": {package: version}, "knobs": [str]}

"reason" is "" when available. "knobs" are the stack's own settings that
select the runner. The probed packages are imported lazily, one probe at a
time; an import that raises is reported, never propagated.

Run as a script it prints one JSON line per runner:

  python3 worker/plugins/stacks.py --device sm_90a
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import importlib.metadata
import importlib.util
import json
import os
import re
import sys
from typing import Any, Sequence

Capability = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Package:
    """A top-level importable package and the distributions that ship it."""

    module: str  # import name, also the key in "versions"
    distributions: tuple[str, ...]  # importlib.metadata names, tried in order


@dataclasses.dataclass(frozen=True)
class Runner:
    """One MoE runner of a serving stack, as data."""

    name: str
    packages: tuple[Package, ...]
    # "pkg.module" must import; "pkg.module:symbol" must also define symbol.
    needs: tuple[str, ...]
    # Device architectures it runs on, any of: "sm_100a" (that one exactly,
    # for kernels built with its arch-specific features) or "sm_80+" (that
    # one or newer).
    archs: tuple[str, ...]
    why: str  # why it needs those architectures, one line
    knobs: tuple[str, ...] = ()


FLASHINFER = Package("flashinfer", ("flashinfer-python", "flashinfer"))
CUTLASS_DSL = Package("cutlass", ("nvidia-cutlass-dsl",))
VLLM = Package("vllm", ("vllm",))
SGLANG = Package("sglang", ("sglang",))
TENSORRT_LLM = Package("tensorrt_llm", ("tensorrt_llm", "tensorrt-llm"))

_TRTLLM_MOE = "tensorrt_llm._torch.modules.fused_moe"

RUNNERS: tuple[Runner, ...] = (
    Runner(
        name="flashinfer_cutlass_moe",
        packages=(FLASHINFER,),
        needs=("flashinfer.fused_moe:cutlass_fused_moe",),
        archs=("sm_100+",),
        why="NVFP4 x NVFP4 grouped GEMM on Blackwell's FP4 tensor cores; "
        "its sm_90 build takes FP8/BF16 weights only",
    ),
    Runner(
        name="flashinfer_trtllm_fp4_moe",
        packages=(FLASHINFER,),
        needs=("flashinfer.fused_moe:trtllm_fp4_block_scale_moe",),
        archs=("sm_100a", "sm_103a"),
        why="trtllm-gen's precompiled cubins use tcgen05 and exist for "
        "datacenter Blackwell only",
    ),
    Runner(
        name="flashinfer_cute_dsl_moe",
        packages=(FLASHINFER, CUTLASS_DSL),
        needs=(
            "flashinfer.cute_dsl",
            "flashinfer.cute_dsl.blockscaled_gemm:grouped_gemm_nt_masked",
            "cutlass.cute",
        ),
        archs=("sm_100a", "sm_103a"),
        why="the CuTe-DSL block-scaled grouped GEMM is written for "
        "tcgen05 and tensor memory (SM100 kernels)",
    ),
    Runner(
        name="vllm_triton_fused_moe",
        packages=(VLLM,),
        needs=("vllm.model_executor.layers.fused_moe:fused_experts",),
        archs=("sm_80+",),
        why="Triton's tensor-core dot on BF16 needs Ampere's mma; NVFP4 "
        "weights reach it only dequantized",
    ),
    Runner(
        name="vllm_marlin_fp4_moe",
        packages=(VLLM,),
        needs=(
            "vllm.model_executor.layers.quantization.utils.marlin_utils_fp4"
            ":prepare_moe_fp4_layer_for_marlin",
            "vllm.model_executor.layers.fused_moe.fused_marlin_moe"
            ":fused_marlin_moe",
        ),
        archs=("sm_80+",),
        why="Marlin dequantizes FP4 to BF16 in registers for mma.sync with "
        "cp.async loads: Ampere or newer, no FP4 tensor cores needed",
    ),
    Runner(
        name="sglang_triton",
        packages=(SGLANG,),
        needs=(
            "sglang.srt.layers.moe.utils:MoeRunnerBackend",
            "sglang.srt.layers.moe.moe_runner.triton",
        ),
        archs=("sm_80+",),
        why="Triton's tensor-core dot on BF16 needs Ampere's mma",
        knobs=("--moe-runner-backend triton",),
    ),
    Runner(
        name="sglang_flashinfer_cutlass",
        packages=(SGLANG, FLASHINFER),
        needs=(
            "sglang.srt.layers.moe.utils:MoeRunnerBackend",
            "flashinfer.fused_moe:cutlass_fused_moe",
        ),
        archs=("sm_100+",),
        why="SGLang calls FlashInfer's CUTLASS fused MoE, whose NVFP4 path "
        "needs Blackwell's FP4 tensor cores",
        knobs=("--moe-runner-backend flashinfer_cutlass",),
    ),
    Runner(
        name="sglang_flashinfer_trtllm",
        packages=(SGLANG, FLASHINFER),
        needs=(
            "sglang.srt.layers.moe.utils:MoeRunnerBackend",
            "sglang.srt.layers.moe.moe_runner.flashinfer_trtllm",
            "flashinfer.fused_moe:trtllm_fp4_block_scale_moe",
        ),
        archs=("sm_100a", "sm_103a"),
        why="SGLang calls FlashInfer's trtllm-gen MoE, whose cubins exist "
        "for datacenter Blackwell only",
        knobs=("--moe-runner-backend flashinfer_trtllm",),
    ),
    Runner(
        name="sglang_flashinfer_cutedsl",
        packages=(SGLANG, FLASHINFER, CUTLASS_DSL),
        needs=(
            "sglang.srt.layers.moe.utils:MoeRunnerBackend",
            "flashinfer.cute_dsl.blockscaled_gemm:grouped_gemm_nt_masked",
            "cutlass.cute",
        ),
        archs=("sm_100a", "sm_103a"),
        why="SGLang calls FlashInfer's CuTe-DSL grouped GEMM, written for "
        "tcgen05 (SM100 kernels)",
        knobs=("--moe-runner-backend flashinfer_cutedsl",),
    ),
    Runner(
        name="trtllm_cutlass_moe",
        packages=(TENSORRT_LLM,),
        needs=(f"{_TRTLLM_MOE}.fused_moe_cutlass:CutlassFusedMoE",),
        archs=("sm_100+",),
        why="its NVFP4 grouped GEMM needs Blackwell's FP4 tensor cores",
        knobs=("moe_config.backend=CUTLASS",),
    ),
    Runner(
        name="trtllm_gen_moe",
        packages=(TENSORRT_LLM,),
        needs=(f"{_TRTLLM_MOE}.fused_moe_trtllm_gen:TRTLLMGenFusedMoE",),
        archs=("sm_100a", "sm_103a"),
        why="trtllm-gen's precompiled cubins use tcgen05 and exist for "
        "datacenter Blackwell only",
        knobs=("moe_config.backend=TRTLLM",),
    ),
    Runner(
        name="trtllm_cute_dsl_moe",
        packages=(TENSORRT_LLM, CUTLASS_DSL),
        needs=(
            f"{_TRTLLM_MOE}.fused_moe_cute_dsl:CuteDslFusedMoE",
            "cutlass.cute",
        ),
        archs=("sm_100a", "sm_103a"),
        why="its CuTe-DSL kernels are the Sm100 block-scaled ones; the "
        "runner refuses other SM versions",
        knobs=("moe_config.backend=CUTEDSL",),
    ),
)

_SM_RE = re.compile(r"^(?:sm_?)?(\d+)([a-z]?)$")


def parse_capability(device: Any) -> Capability | None:
    """(major, minor) of "sm_90a", "sm_120", "9.0", (9, 0); None: unknown."""
    if isinstance(device, (tuple, list)) and len(device) == 2:
        return int(device[0]), int(device[1])
    if not isinstance(device, str):
        return None
    text = device.strip().lower()
    if re.fullmatch(r"\d+\.\d+", text):
        major, minor = text.split(".")
        return int(major), int(minor)
    match = _SM_RE.match(text)
    if match is None or len(match.group(1)) < 2:
        return None
    digits = match.group(1)
    return int(digits[:-1]), int(digits[-1])


def capability_text(capability: Capability | None) -> str:
    """(9, 0) as "sm_90a": from Hopper on, devices have their "a" features."""
    if capability is None:
        return "unknown"
    major, minor = capability
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def arch_fits(arch: str, capability: Capability) -> bool:
    """Whether a `capability` device runs `arch` code ("sm_100a", "sm_80+")."""
    at_least = arch.endswith("+")
    required = parse_capability(arch.rstrip("+"))
    if required is None:
        raise ValueError(f"bad architecture {arch!r}")
    return capability >= required if at_least else capability == required


def device_capability() -> str:
    """This machine's first CUDA device, read through torch, or "unknown"."""
    try:
        import torch  # pylint: disable=import-outside-toplevel

        if not torch.cuda.is_available():
            return "unknown"
        return capability_text(tuple(torch.cuda.get_device_capability(0)))
    except Exception:  # pylint: disable=broad-except
        return "unknown"


def _error_text(error: BaseException) -> str:
    message = str(error)
    kind = type(error).__name__
    return f"{kind}: {message}" if message else kind


class _Importer:
    """Imports modules once per probe run and remembers what each raised."""

    def __init__(self) -> None:
        self._results: dict[str, Any] = {}

    def load(self, name: str) -> Any:
        """The module, or the exception its import raised (returned)."""
        if name not in self._results:
            try:
                self._results[name] = importlib.import_module(name)
            # pylint: disable-next=broad-except
            except (Exception, SystemExit) as error:
                self._results[name] = error
        return self._results[name]


def _missing(error: BaseException, module: str) -> bool:
    """Whether `error` says that `module`, or a parent of it, does not exist."""
    if not isinstance(error, ModuleNotFoundError) or not error.name:
        return False
    return module == error.name or module.startswith(error.name + ".")


def _version(package: Package, module: Any) -> str:
    for distribution in package.distributions:
        try:
            return importlib.metadata.version(distribution)
        except Exception:  # pylint: disable=broad-except
            continue  # not this distribution (or its metadata is unreadable)
    version = getattr(module, "__version__", None)
    return str(version) if version else "unknown"


def _absent(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except (Exception, SystemExit):  # pylint: disable=broad-except
        return False  # there, but its finder failed: the import will say why


def _refusal(runner: Runner, capability: Capability | None) -> str:
    if capability is not None and any(
            arch_fits(arch, capability) for arch in runner.archs):
        return ""
    archs = " or ".join(runner.archs)
    return f"needs {archs}, device is {capability_text(capability)}"


def probe(runner: Runner, device: Any,
          importer: _Importer | None = None) -> dict:
    """One runner's probe on a device of capability `device` (module doc)."""
    importer = importer or _Importer()
    versions: dict[str, str] = {}
    result = {
        "backend": runner.name,
        "available": False,
        "reason": "",
        "versions": versions,
        "knobs": list(runner.knobs),
    }
    subjects: dict[str, str] = {}  # package -> "flashinfer 0.6.3"
    for package in runner.packages:
        if _absent(package.module):
            result["reason"] = f"{package.module}: not installed"
            return result
        module = importer.load(package.module)
        if isinstance(module, BaseException):
            if _missing(module, package.module):
                result["reason"] = f"{package.module}: not installed"
            else:
                result["reason"] = (
                    f"{package.module}: import failed: {_error_text(module)}")
            return result
        version = _version(package, module)
        versions[package.module] = version
        subjects[package.module] = f"{package.module} {version}"
    for need in runner.needs:
        name, _, symbol = need.partition(":")
        subject = subjects[name.split(".")[0]]
        module = importer.load(name)
        if isinstance(module, BaseException):
            if _missing(module, name):
                result["reason"] = f"{subject}: module {module.name} not found"
            else:
                error = _error_text(module)
                result["reason"] = (
                    f"{subject}: importing {name} failed: {error}")
            return result
        if symbol and not hasattr(module, symbol):
            result["reason"] = f"{subject}: {name} has no {symbol}"
            return result
    result["reason"] = _refusal(runner, parse_capability(device))
    result["available"] = not result["reason"]
    return result


def probe_all(device: Any) -> list[dict]:
    """Every runner of RUNNERS probed on a device of capability `device`."""
    importer = _Importer()
    return [probe(runner, device, importer) for runner in RUNNERS]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--device",
        default=None,
        help='compute capability, e.g. "sm_90a" or "9.0" (default: from torch)')
    args = parser.parse_args(argv)
    # The probed packages may print to fd 1 while importing (TensorRT-LLM's
    # banner): they get stderr, and the JSON lines a stdout of their own.
    sys.stdout.flush()
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        device = args.device if args.device is not None else device_capability()
        for result in probe_all(device):
            out.write(json.dumps(result, sort_keys=True) + "\n")
    finally:
        out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
