"""libmoetune_model through ctypes: a MoE layer's inputs as numpy arrays,
the same ones a native backend gets (kernels/c_api/moetune_model.h)."""
import ctypes
import os

import numpy as np

ABI_VERSION = 1
ROUTINGS = {"uniform": 0, "skewed": 1, "replayed": 2}


class _Spec(ctypes.Structure):
    _fields_ = [("preset", ctypes.c_char_p), ("seed", ctypes.c_uint64),
                ("batch", ctypes.c_int32), ("layer", ctypes.c_int32),
                ("tp", ctypes.c_int32), ("ep", ctypes.c_int32),
                ("rank", ctypes.c_int32), ("routing", ctypes.c_int32),
                ("skew", ctypes.c_double),
                ("histogram", ctypes.POINTER(ctypes.c_double)),
                ("histogram_len", ctypes.c_int32)]


class _Dims(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int32) for name in
                ("batch", "hidden", "inter_slice", "num_experts", "top_k",
                 "block_size", "layer", "has_shared")]


class Expert:
    """One expert's NVFP4 slice: codes, E4M3 scales and the FP32 scale of
    gate_up [2 * inter, hidden] (gate rows, then up) and down [hidden, inter]."""

    def __init__(self, gate_up_codes, gate_up_scales, gate_up_scale,
                 down_codes, down_scales, down_scale):
        self.gate_up_codes, self.gate_up_scales = gate_up_codes, gate_up_scales
        self.gate_up_scale = gate_up_scale
        self.down_codes, self.down_scales = down_codes, down_scales
        self.down_scale = down_scale


def _ptr(array, ctype):
    return array.ctypes.data_as(ctypes.POINTER(ctype))


def load(path):
    """The library at `path` (or $MOETUNE_MODEL_LIBRARY), ABI checked."""
    path = path or os.environ.get("MOETUNE_MODEL_LIBRARY", "")
    if not path:
        raise RuntimeError("no model library: the run request's "
                           "inputs.model_library and $MOETUNE_MODEL_LIBRARY "
                           "are empty")
    lib = ctypes.CDLL(path)
    version = lib.moetune_model_abi_version()
    if version != ABI_VERSION:
        raise RuntimeError(f"{path} has ABI version {version}; this host "
                           f"speaks {ABI_VERSION}")
    lib.moetune_moe_create.restype = ctypes.c_void_p
    lib.moetune_moe_create.argtypes = [ctypes.POINTER(_Spec), ctypes.c_char_p,
                                       ctypes.c_size_t]
    lib.moetune_moe_free.argtypes = [ctypes.c_void_p]
    for name in ("moetune_moe_get_dims", "moetune_moe_fill_activations",
                 "moetune_moe_fill_routing", "moetune_moe_expert_owned",
                 "moetune_moe_fill_expert", "moetune_moe_fill_reference"):
        getattr(lib, name).restype = ctypes.c_int32
    return lib


class MoeInputs:
    """One rank's MoE layer of a workload (a RunRequest's `inputs`)."""

    def __init__(self, lib, inputs):
        routing = inputs.get("routing", {})
        histogram = [float(h) for h in routing.get("histogram", [])]
        self._histogram = (ctypes.c_double * max(1, len(histogram)))(*histogram)
        distribution = routing.get("distribution", "uniform")
        if distribution not in ROUTINGS:
            raise ValueError(f"inputs.routing.distribution: '{distribution}' "
                             f"is not allowed; allowed: {', '.join(ROUTINGS)}")
        spec = _Spec(inputs.get("preset", "").encode(), int(inputs.get("seed", 0)),
                     inputs.get("batch", 0), inputs.get("layer", -1),
                     inputs.get("tp", 1), inputs.get("ep", 1),
                     inputs.get("rank", 0), ROUTINGS[distribution],
                     float(routing.get("skew", 0.0)), self._histogram,
                     len(histogram))
        error = ctypes.create_string_buffer(512)
        self._lib = lib
        self._handle = lib.moetune_moe_create(ctypes.byref(spec), error, 512)
        if not self._handle:
            raise ValueError(error.value.decode())
        self._handle = ctypes.c_void_p(self._handle)
        dims = _Dims()
        lib.moetune_moe_get_dims(self._handle, ctypes.byref(dims))
        self.dims = {name: getattr(dims, name) for name, _ in _Dims._fields_}

    def __del__(self):
        if getattr(self, "_handle", None):
            self._lib.moetune_moe_free(self._handle)

    def activations(self):
        d = self.dims
        x = np.empty((d["batch"], d["hidden"]), dtype=np.float32)
        self._lib.moetune_moe_fill_activations(self._handle, _ptr(x, ctypes.c_float))
        return x

    def routing(self):
        """(experts int32 [batch, top_k], weights float32 [batch, top_k])."""
        d = self.dims
        experts = np.empty((d["batch"], d["top_k"]), dtype=np.int32)
        weights = np.empty((d["batch"], d["top_k"]), dtype=np.float32)
        self._lib.moetune_moe_fill_routing(
            self._handle, _ptr(experts, ctypes.c_int32),
            _ptr(weights, ctypes.c_float))
        return experts, weights

    def owned(self, expert):
        return self._lib.moetune_moe_expert_owned(self._handle, expert) == 1

    def expert(self, expert):
        """Expert `expert`'s slice (-1: the shared expert)."""
        d = self.dims
        hidden, inter, block = d["hidden"], d["inter_slice"], d["block_size"]
        gu_codes = np.empty((2 * inter, hidden // 2), dtype=np.uint8)
        gu_scales = np.empty((2 * inter, hidden // block), dtype=np.uint8)
        dn_codes = np.empty((hidden, inter // 2), dtype=np.uint8)
        dn_scales = np.empty((hidden, inter // block), dtype=np.uint8)
        gu_scale, dn_scale = ctypes.c_float(), ctypes.c_float()
        u8 = ctypes.c_uint8
        rc = self._lib.moetune_moe_fill_expert(
            self._handle, expert, _ptr(gu_codes, u8), _ptr(gu_scales, u8),
            ctypes.byref(gu_scale), _ptr(dn_codes, u8), _ptr(dn_scales, u8),
            ctypes.byref(dn_scale))
        if rc != 0:
            raise ValueError(f"expert {expert}: not owned by this rank")
        return Expert(gu_codes, gu_scales, np.float32(gu_scale.value),
                      dn_codes, dn_scales, np.float32(dn_scale.value))

    def reference(self):
        d = self.dims
        y = np.empty((d["batch"], d["hidden"]), dtype=np.float32)
        self._lib.moetune_moe_fill_reference(self._handle, _ptr(y, ctypes.c_float))
        return y
