"""The serving stacks' MoE runners as plugin backends: one backend per entry
of stacks.RUNNERS (worker/plugins/stacks.py), named as the runner.

A runner's probe is stacks' probe of it: unavailable with stacks' exact
reason ("flashinfer 0.6.3: module flashinfer.cute_dsl not found"), the
versions of its packages ("" for one not found), its knobs in the
description. On a CPU worker a runner whose packages are all there is
unavailable because it is a GPU runner. A runner stacks finds available
runs only through a run adapter of this host (ADAPTERS); without one its
probe says so and it stays unavailable. Running an unavailable runner
raises RuntimeError with the probe's reason: an UNAVAILABLE error reply.
"""
import importlib.util
import os
import sys

_STACKS_PATH = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
        __file__)))), "stacks.py")

# Runner name -> a backend object (prepare, run, time) that runs it on
# moetune's inputs. None yet: every runner is probed, none is run.
ADAPTERS = {}


def load_stacks():
    """worker/plugins/stacks.py, loaded once from beside this package."""
    name = "moetune_stacks"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, _STACKS_PATH)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


def _capability(device):
    """The device's "sm_90a" through torch, or None (CPU, or no torch)."""
    if not device.get("is_gpu", False):
        return None
    try:
        import torch  # pylint: disable=import-outside-toplevel
        capability = torch.cuda.get_device_capability(device.get("ordinal", 0))
        return load_stacks().capability_text(tuple(capability))
    except Exception:  # pylint: disable=broad-except
        return None


class StackRunner:
    """One serving-stack runner (a stacks.Runner) as a plugin backend."""

    def __init__(self, runner):
        self.runner = runner
        self.name = runner.name

    def _reason(self, result, device):
        if not device.get("is_gpu", False) and result["reason"].startswith(
                "needs "):
            return (f"{self.name}: GPU runner ({result['reason']}); this "
                    "worker runs on the CPU")
        if result["available"] and self.name not in ADAPTERS:
            return f"{self.name}: no run adapter in the plugin host yet"
        return result["reason"]

    def probe(self, device):
        result = load_stacks().probe(self.runner, _capability(device))
        reason = self._reason(result, device)
        knobs = ", ".join(result["knobs"]) or "none"
        return {
            "available": not reason, "reason": reason,
            "versions": [{"name": p.module,
                          "version": result["versions"].get(p.module, "")}
                         for p in self.runner.packages],
            "placement": "GPU", "tiles": [], "graph_capturable": False,
            "description": f"{self.name} ({self.runner.why}; knobs: {knobs})"}

    def refuse_run(self, device):
        """Why a run cannot start here ("" when it can)."""
        probe = self.probe(device)
        return "" if probe["available"] else (
            f"{self.name} is unavailable: {probe['reason']}")

    def _adapter(self):
        return ADAPTERS[self.name]

    def prepare(self, inputs, tile, device, cuda_graph):
        return self._adapter().prepare(inputs, tile, device, cuda_graph)

    def run(self, state):
        return self._adapter().run(state)

    def time(self, state, warmup, iterations):
        return self._adapter().time(state, warmup, iterations)


def runners():
    """A StackRunner for every entry of stacks.RUNNERS, in its order."""
    return [StackRunner(runner) for runner in load_stacks().RUNNERS]
