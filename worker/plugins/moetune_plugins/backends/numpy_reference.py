"""numpy_reference: the MoE layer in numpy (float64 sums over the NVFP4
weights dequantized exactly), so that the out-of-process path runs end to
end on any CPU. Only the experts the batch routes to are dequantized."""
import time

import numpy as np

from .. import nvfp4


def _silu(v):
    return v / (1.0 + np.exp(-v))


class NumpyReference:
    name = "numpy_reference"

    def probe(self, device):
        reply = {"available": not device.get("is_gpu", False),
                 "versions": [{"name": "numpy", "version": np.__version__}],
                 "placement": "CPU", "tiles": [], "graph_capturable": False,
                 "error_bound": 1e-4,
                 "error_bound_why": "the reference's exact NVFP4 weights, "
                 "summed in float64: only summation order differs",
                 "description": "the MoE layer in numpy, float64 sums"}
        if device.get("is_gpu", False):
            reply["reason"] = ("CPU backend; this worker drives GPU "
                               f"{device.get('ordinal', 0)}")
        return reply

    def prepare(self, inputs, tile, device, cuda_graph):
        x = inputs.activations().astype(np.float64)
        experts, weights = inputs.routing()
        layer = {}
        for e in sorted(set(experts.ravel().tolist())):
            if inputs.owned(e):
                layer[e] = [w.astype(np.float64) for w in
                            nvfp4.expert_weights(inputs.expert(e))]
        shared = None
        if inputs.dims["has_shared"]:
            shared = [w.astype(np.float64) for w in
                      nvfp4.expert_weights(inputs.expert(-1))]
        return {"x": x, "experts": experts, "weights": weights,
                "layer": layer, "shared": shared,
                "inter": inputs.dims["inter_slice"]}

    @staticmethod
    def _expert(state, w, rows):
        gate_up, down = w
        h = state["x"][rows] @ gate_up.T
        inter = state["inter"]
        act = _silu(h[:, :inter].astype(np.float32)) * h[:, inter:].astype(np.float32)
        return act.astype(np.float64) @ down.T

    def run(self, state):
        y = np.zeros_like(state["x"])
        for e, w in state["layer"].items():
            rows, slots = np.nonzero(state["experts"] == e)
            gains = state["weights"][rows, slots].astype(np.float64)
            np.add.at(y, rows, gains[:, None] * self._expert(state, w, rows))
        if state["shared"] is not None:
            y += self._expert(state, state["shared"], np.arange(y.shape[0]))
        return y.astype(np.float32)

    def time(self, state, warmup, iterations):
        for _ in range(warmup):
            self.run(state)
        samples = []
        for _ in range(iterations):
            start = time.perf_counter_ns()
            self.run(state)
            samples.append((time.perf_counter_ns() - start) / 1e3)
        return samples
