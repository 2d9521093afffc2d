// The basic float32 operations of the CPU reference decode step, written to
// be obviously right: plain loops, double accumulation. Pure functions on
// caller-owned arrays; thread-safe.
#pragma once

namespace moetune::ref {

// sum_i a[i] * b[i], accumulated in double (each float product is exact in
// double, so the result depends only on the summation order: ascending i).
double Dot(const float* a, const float* b, int n);

// out[i] = x[i] / sqrt(mean(x^2) + eps) * gamma[i]. out may alias x.
void RmsNorm(const float* x, const float* gamma, int n, float eps, float* out);

// out[i] = (x[i] - mean) / sqrt(var + eps) * gamma[i] + beta[i], with the
// biased (1/n) variance; beta may be null (zero). out may alias x.
void LayerNorm(const float* x, const float* gamma, const float* beta, int n,
               float eps, float* out);

// Rotary embedding in place, HALF-SPLIT convention (GPT-NeoX
// "rotate_half"): element i pairs with i + dim/2 for i < dim/2, rotated by
// angle position * theta^(-2i/dim):
//   x'[i]         = x[i] cos a - x[i+dim/2] sin a
//   x'[i+dim/2]   = x[i+dim/2] cos a + x[i] sin a
// dim must be even.
void ApplyRope(float* x, int dim, int position, float theta);

// In place, max-subtracted; n >= 1.
void Softmax(float* x, int n);

float Sigmoid(float x);
// x * sigmoid(x).
float Silu(float x);

// Rounds a float to the nearest-even BF16 value (kept as float): how the
// reference stores activations where a kernel would read BF16.
float RoundToBf16(float x);

}  // namespace moetune::ref
