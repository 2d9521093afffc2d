"""NVFP4 decoding in numpy, bit for bit the reference's
(kernels/model/nvfp4_format.h): w = (e2m1(code) * e4m3(scale)) * tensor_scale,
the first product exact in float32, the second its only rounding."""
import numpy as np

BLOCK = 16
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6],
                dtype=np.float32)


def _e4m3(byte):
    sign = -1.0 if byte & 0x80 else 1.0
    exponent, mantissa = (byte >> 3) & 0xF, byte & 7
    if byte & 0x7F == 0x7F:
        return np.nan
    if exponent == 0:
        return sign * mantissa / 512.0
    return sign * (1 + mantissa / 8.0) * 2.0 ** (exponent - 7)


E4M3 = np.array([_e4m3(b) for b in range(256)], dtype=np.float32)


def dequantize(codes, scales, tensor_scale):
    """A packed [rows, k] tensor (codes [rows, k/2], scales [rows, k/16]) as
    float32 [rows, k]."""
    rows = codes.shape[0]
    values = np.empty((rows, codes.shape[1] * 2), dtype=np.float32)
    values[:, 0::2] = E2M1[codes & 0xF]
    values[:, 1::2] = E2M1[codes >> 4]
    block = np.repeat(E4M3[scales], BLOCK, axis=1)
    return (values * block) * np.float32(tensor_scale)


def expert_weights(expert):
    """(gate_up [2 * inter, hidden], down [hidden, inter]) as float32."""
    return (dequantize(expert.gate_up_codes, expert.gate_up_scales,
                       expert.gate_up_scale),
            dequantize(expert.down_codes, expert.down_scales, expert.down_scale))
