"""torch_grouped_bf16 and torch_grouped_fp8: the MoE layer's routed experts
as PyTorch grouped GEMMs over the tokens sorted by expert, for comparing
moetune's kernels with what a PyTorch serving stack would run.

  bf16: the NVFP4 weights dequantized once at setup to BF16, exactly (an
        E2M1 value times an E4M3 scale has at most 6 significant bits, BF16
        holds 8; the FP32 tensor scale is applied to the GEMM's output in
        float32), then torch._grouped_mm.
  fp8:  the weights requantized once at setup to FP8 E4M3 with one float32
        scale per output row (row amax / 448), the activations per token
        the same way on every run, then torch._scaled_grouped_mm.

The token sort by expert is made at setup (the workload's routing is
fixed); the timed region is the grouped GEMMs, SiLU, the weighted
scatter-add and the shared expert. torch is imported only when probed or
run: where it is missing the probe says "not installed: torch"."""
import importlib
import time

import numpy as np

BOUNDS = {
    "bf16": (2e-2, "weights exact in BF16 (E2M1 x E4M3 fits BF16's 8 bits, "
             "the FP32 tensor scale applied in float32 after the GEMM); the "
             "GEMM outputs rounded to BF16 (2^-9 relative each): ~1e-3 "
             "expected, the GPU backends' bound 2e-2"),
    "fp8": (8e-2, "weights and activations each requantized to E4M3 "
            "(3 mantissa bits: up to 2^-4 relative per value, ~2.5% RMS) "
            "per row, in both GEMMs: ~5% relative L2 expected; bound 8e-2"),
}
OPS = {"bf16": "_grouped_mm", "fp8": "_scaled_grouped_mm"}
E4M3_MAX = 448.0


def _import_torch():
    try:
        return importlib.import_module("torch"), ""
    except ImportError:
        return None, "not installed: torch"


class TorchGrouped:
    def __init__(self, fmt):
        self.fmt = fmt
        self.name = f"torch_grouped_{fmt}"

    def _why_not(self, torch, device):
        if not device.get("is_gpu", False):
            return "GPU backend; this worker runs on the CPU"
        if not torch.cuda.is_available():
            return "torch sees no CUDA device"
        if not hasattr(torch, OPS[self.fmt]):
            return f"torch {torch.__version__} has no torch.{OPS[self.fmt]}"
        major, minor = torch.cuda.get_device_capability(device.get("ordinal", 0))
        if major < 9:
            return f"needs sm_90+, device is sm_{major}{minor}"
        return ""

    def probe(self, device):
        torch, missing = _import_torch()
        bound, why = BOUNDS[self.fmt]
        reply = {"placement": "GPU", "tiles": [], "graph_capturable": True,
                 "error_bound": bound, "error_bound_why": why,
                 "description": f"PyTorch torch.{OPS[self.fmt]} over the "
                 f"experts ({self.fmt} weights)",
                 "versions": [{"name": "torch",
                               "version": torch.__version__ if torch else ""}]}
        reason = missing or self._why_not(torch, device)
        if torch is not None:
            reply["versions"].append({"name": "cuda",
                                      "version": torch.version.cuda or ""})
        reply["available"] = not reason
        reply["reason"] = reason
        return reply

    def prepare(self, inputs, tile, device, cuda_graph):
        torch, missing = _import_torch()
        if torch is None:
            raise RuntimeError(missing)
        state = _Layer(torch, inputs, self.fmt,
                       torch.device("cuda", device.get("ordinal", 0)))
        if cuda_graph:
            state.capture()
        return state

    def run(self, state):
        state.replay()
        return state.y.float().cpu().numpy().astype(np.float32)

    def time(self, state, warmup, iterations):
        torch = state.torch
        for _ in range(warmup):
            state.replay()
        samples = []
        for _ in range(iterations):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            state.replay()
            end.record()
            end.synchronize()
            samples.append(start.elapsed_time(end) * 1e3)
        return samples


class _Layer:
    """One rank's layer on the GPU: weights in the backend's format, the
    tokens sorted by expert, static buffers (so that a CUDA graph can
    replay it)."""

    def __init__(self, torch, inputs, fmt, dev):
        self.torch, self.fmt, self.dev = torch, fmt, dev
        self.graph = None
        self.inter = inputs.dims["inter_slice"]
        from .. import nvfp4
        self.e2m1 = torch.from_numpy(nvfp4.E2M1).to(dev)
        self.e4m3 = torch.from_numpy(nvfp4.E4M3).to(dev)
        self._load_weights(inputs)
        self._sort_tokens(inputs)

    def _dequant(self, codes, scales):
        """Codes times block scales, float32 [rows, k] (exact)."""
        t = self.torch
        c = t.from_numpy(codes).to(self.dev).long()
        values = t.stack([self.e2m1[c & 0xF], self.e2m1[c >> 4]], dim=-1)
        values = values.reshape(codes.shape[0], codes.shape[1] * 2)
        block = self.e4m3[t.from_numpy(scales).to(self.dev).long()]
        return values * block.repeat_interleave(16, dim=1)

    def _convert(self, w, tensor_scale):
        """(weights, per-row float32 scales) in the backend's format."""
        t = self.torch
        if self.fmt == "bf16":
            rows = t.full((w.shape[0],), float(tensor_scale), device=self.dev)
            return w.to(t.bfloat16), rows
        w = w * float(tensor_scale)
        rows = w.abs().amax(dim=1).clamp(min=1e-30) / E4M3_MAX
        return (w / rows[:, None]).to(t.float8_e4m3fn), rows

    def _expert(self, inputs, e):
        ex = inputs.expert(e)
        gu = self._convert(self._dequant(ex.gate_up_codes, ex.gate_up_scales),
                           ex.gate_up_scale)
        dn = self._convert(self._dequant(ex.down_codes, ex.down_scales),
                           ex.down_scale)
        return gu, dn

    def _load_weights(self, inputs):
        t = self.torch
        d = inputs.dims
        self.owned = [e for e in range(d["num_experts"]) if inputs.owned(e)]
        gus, dns = zip(*(self._expert(inputs, e) for e in self.owned))
        self.gu_w = t.stack([w for w, _ in gus])   # [G, 2I, H]
        self.gu_s = t.stack([s for _, s in gus])   # [G, 2I]
        self.dn_w = t.stack([w for w, _ in dns])   # [G, H, I]
        self.dn_s = t.stack([s for _, s in dns])   # [G, H]
        self.shared = self._expert(inputs, -1) if d["has_shared"] else None

    def _sort_tokens(self, inputs):
        t = self.torch
        experts, weights = inputs.routing()
        local = {e: g for g, e in enumerate(self.owned)}
        slots = [(local[e], b, float(weights[b, k]))
                 for b in range(experts.shape[0])
                 for k, e in enumerate(experts[b].tolist()) if e in local]
        slots.sort(key=lambda s: s[0])
        groups = np.array([s[0] for s in slots], dtype=np.int64)
        counts = np.bincount(groups, minlength=len(self.owned))
        self.offs = t.from_numpy(np.cumsum(counts).astype(np.int32)).to(self.dev)
        self.group = t.from_numpy(groups).to(self.dev)
        self.rows = t.tensor([s[1] for s in slots], device=self.dev)
        self.gain = t.tensor([s[2] for s in slots], device=self.dev)
        x = t.from_numpy(inputs.activations()).to(self.dev)
        self.x = x.to(t.bfloat16)  # exact: the activations are BF16 values
        self.y = t.zeros(x.shape, dtype=t.float32, device=self.dev)

    def _gemm(self, a, w, row_scales, group):
        """Grouped a[m] @ w[group[m]].T, times the rows' float32 scales."""
        t = self.torch
        if self.fmt == "bf16":
            out = t._grouped_mm(a.to(t.bfloat16), w.transpose(1, 2), offs=self.offs)
            return out.float() * row_scales[group]
        a_scale = a.float().abs().amax(dim=1).clamp(min=1e-30) / E4M3_MAX
        aq = (a.float() / a_scale[:, None]).to(t.float8_e4m3fn)
        return t._scaled_grouped_mm(aq, w.transpose(1, 2), a_scale, row_scales,
                                    offs=self.offs, out_dtype=t.float32)

    def _shared(self):
        t = self.torch
        (gu, gu_s), (dn, dn_s) = self.shared
        if self.fmt == "fp8":  # one dense BF16 pass: the shared expert is small
            gu, dn = (gu.float() * gu_s[:, None]).to(t.bfloat16), \
                     (dn.float() * dn_s[:, None]).to(t.bfloat16)
            gu_s, dn_s = t.ones_like(gu_s), t.ones_like(dn_s)
        h = (self.x @ gu.to(t.bfloat16).T).float() * gu_s
        act = t.nn.functional.silu(h[:, :self.inter]) * h[:, self.inter:]
        return (act.to(t.bfloat16) @ dn.to(t.bfloat16).T).float() * dn_s

    def forward(self):
        t = self.torch
        h = self._gemm(self.x[self.rows], self.gu_w, self.gu_s, self.group)
        act = t.nn.functional.silu(h[:, :self.inter]) * h[:, self.inter:]
        out = self._gemm(act, self.dn_w, self.dn_s, self.group)
        self.y.zero_()
        self.y.index_add_(0, self.rows, out * self.gain[:, None])
        if self.shared is not None:
            self.y += self._shared()

    def capture(self):
        t = self.torch
        stream = t.cuda.Stream()
        stream.wait_stream(t.cuda.current_stream())
        with t.cuda.stream(stream):
            self.forward()  # warm-up outside the graph
        t.cuda.current_stream().wait_stream(stream)
        self.graph = t.cuda.CUDAGraph()
        with t.cuda.graph(self.graph):
            self.forward()

    def replay(self):
        if self.graph is not None:
            self.graph.replay()
        else:
            self.forward()
