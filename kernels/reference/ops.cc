#include "kernels/reference/ops.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/model/weight_gen.h"

namespace moetune::ref {

double Dot(const float* a, const float* b, int n) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    sum += static_cast<double>(a[i]) * static_cast<double>(b[i]);
  }
  return sum;
}

void RmsNorm(const float* x, const float* gamma, int n, float eps, float* out) {
  const double mean_square = Dot(x, x, n) / n;
  const double inv_rms = 1.0 / std::sqrt(mean_square + eps);
  for (int i = 0; i < n; ++i) {
    out[i] = static_cast<float>(x[i] * inv_rms * gamma[i]);
  }
}

void LayerNorm(const float* x, const float* gamma, const float* beta, int n,
               float eps, float* out) {
  double mean = 0.0;
  for (int i = 0; i < n; ++i) mean += x[i];
  mean /= n;
  double variance = 0.0;
  for (int i = 0; i < n; ++i) variance += (x[i] - mean) * (x[i] - mean);
  variance /= n;
  const double inv_std = 1.0 / std::sqrt(variance + eps);
  for (int i = 0; i < n; ++i) {
    const double shift = beta == nullptr ? 0.0 : beta[i];
    out[i] = static_cast<float>((x[i] - mean) * inv_std * gamma[i] + shift);
  }
}

void ApplyRope(float* x, int dim, int position, float theta) {
  for (int i = 0; i < dim / 2; ++i) {
    const double inv_freq =
        std::pow(static_cast<double>(theta), -2.0 * i / dim);
    const double angle = position * inv_freq;
    const double c = std::cos(angle);
    const double s = std::sin(angle);
    const double even = x[2 * i];
    const double odd = x[2 * i + 1];
    x[2 * i] = static_cast<float>(even * c - odd * s);
    x[2 * i + 1] = static_cast<float>(odd * c + even * s);
  }
}

void Softmax(float* x, int n) {
  float max_value = x[0];
  for (int i = 1; i < n; ++i) max_value = std::max(max_value, x[i]);
  double sum = 0.0;
  for (int i = 0; i < n; ++i)
    sum += std::exp(static_cast<double>(x[i]) - max_value);
  for (int i = 0; i < n; ++i) {
    x[i] = static_cast<float>(std::exp(static_cast<double>(x[i]) - max_value) /
                              sum);
  }
}

float Sigmoid(float x) {
  return static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(x))));
}

float Silu(float x) {
  return static_cast<float>(x *
                            (1.0 / (1.0 + std::exp(-static_cast<double>(x)))));
}

float RoundToBf16(float x) { return weights::RoundBf16(x); }

}  // namespace moetune::ref
