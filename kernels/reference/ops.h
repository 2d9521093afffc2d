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

// Rotary embedding in place, INTERLEAVED convention (GLM-5's, as Hugging
// Face's GlmMoeDsa and DeepSeek's reference apply it): adjacent elements
// (2i, 2i+1) form pair i, rotated by angle position * theta^(-2i/dim):
//   x'[2i]   = x[2i] cos a - x[2i+1] sin a
//   x'[2i+1] = x[2i+1] cos a + x[2i] sin a
// The pairs stay where they are ("in place"); Hugging Face writes the same
// values de-interleaved (the 2i results, then the 2i+1 results), which
// gives the same dot products when q and k share a layout. dim must be even.
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
