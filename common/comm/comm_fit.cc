#include "common/comm/comm_fit.h"

#include <algorithm>
#include <cmath>
#include <tuple>

namespace moetune::comm {
namespace {

constexpr int64_t kSmallBytes = 32768;  // latency-bound messages

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

bool InStream(const CollectiveSample& s, const std::string& impl,
              const std::string& op, int world) {
  return s.impl == impl && s.op == op && s.world == world && !s.in_graph;
}

}  // namespace

double BusBytes(const std::string& op, int world, double bytes) {
  if (world <= 1) return 0;
  const double share = static_cast<double>(world - 1) / world;
  return (op == "allreduce" ? 2.0 : 1.0) * share * bytes;
}

v1::CollectiveFit FitStream(const std::vector<CollectiveSample>& samples,
                            const std::string& impl, const std::string& op,
                            int world) {
  v1::CollectiveFit fit;
  fit.set_allreduce(impl);
  fit.set_op(op);
  fit.set_world_size(world);
  std::vector<double> small;
  const CollectiveSample* largest = nullptr;
  for (const CollectiveSample& s : samples) {
    if (!InStream(s, impl, op, world)) continue;
    if (s.bytes <= kSmallBytes) small.push_back(s.time_us);
    if (largest == nullptr || s.bytes > largest->bytes) largest = &s;
  }
  fit.set_latency_us(Median(small));
  if (largest != nullptr && world > 1) {
    const double wire_us = std::max(largest->time_us - fit.latency_us(), 1e-3);
    fit.set_bus_gbps(BusBytes(op, world, largest->bytes) / wire_us / 1e3);
  }
  for (const CollectiveSample& s : samples) {
    if (!InStream(s, impl, op, world) || s.time_us <= 0) continue;
    const double model =
        fit.latency_us() + (fit.bus_gbps() > 0 ? BusBytes(op, world, s.bytes) /
                                                     (fit.bus_gbps() * 1e3)
                                               : 0);
    fit.set_max_rel_error(
        std::max(fit.max_rel_error(), std::abs(model - s.time_us) / s.time_us));
    fit.set_points(fit.points() + 1);
  }
  return fit;
}

std::vector<v1::CollectiveFit> FitCalibration(
    const std::vector<CollectiveSample>& samples) {
  std::vector<v1::CollectiveFit> fits;
  std::vector<std::tuple<std::string, std::string, int>> seen;
  for (const CollectiveSample& s : samples) {
    if (s.in_graph) continue;
    const auto key = std::make_tuple(s.impl, s.op, s.world);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) continue;
    seen.push_back(key);
    fits.push_back(FitStream(samples, s.impl, s.op, s.world));
  }
  for (const CollectiveSample& s : samples) {
    if (!s.in_graph) continue;
    v1::CollectiveFit& fit = fits.emplace_back();
    fit.set_allreduce(s.impl);
    fit.set_op(s.op);
    fit.set_world_size(s.world);
    fit.set_latency_us(s.time_us);
    fit.set_points(1);
    fit.set_in_graph(true);
  }
  return fits;
}

}  // namespace moetune::comm
