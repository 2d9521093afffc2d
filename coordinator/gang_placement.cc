#include "coordinator/gang_placement.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace moetune::coordinator {

GangCandidate CandidateOf(const std::string& worker_id, const v1::Probe& probe,
                          const std::string& backend) {
  GangCandidate candidate;
  candidate.worker_id = worker_id;
  candidate.host_id = probe.device().host_id();
  candidate.is_gpu = probe.device().is_gpu();
  for (const v1::BackendProbe& b : probe.backends()) {
    if (b.name() == backend) candidate.has_backend = b.available();
  }
  return candidate;
}

namespace {

bool CanJoin(const GangCandidate& c) {
  return c.is_gpu && c.has_backend && !c.host_id.empty();
}

}  // namespace

std::vector<std::string> PlaceGang(const GangCandidate& asker,
                                   const std::vector<GangCandidate>& others,
                                   int world) {
  if (world < 2 || !CanJoin(asker)) return {};
  std::vector<const GangCandidate*> peers;
  for (const GangCandidate& c : others) {
    if (c.worker_id != asker.worker_id && c.idle && CanJoin(c) &&
        c.host_id == asker.host_id) {
      peers.push_back(&c);
    }
  }
  if (static_cast<int>(peers.size()) < world - 1) return {};
  std::sort(peers.begin(), peers.end(),
            [](const GangCandidate* a, const GangCandidate* b) {
              return std::tie(a->idle_since_ms, a->worker_id) <
                     std::tie(b->idle_since_ms, b->worker_id);
            });
  std::vector<std::string> members = {asker.worker_id};
  for (int i = 0; i < world - 1; ++i) members.push_back(peers[i]->worker_id);
  return members;
}

std::string GangShortfall(const std::vector<GangCandidate>& alive,
                          const std::string& backend, bool backend_is_gpu,
                          int world) {
  if (alive.empty()) return "";
  std::map<std::string, int> per_host;
  bool any_gpu = false;
  for (const GangCandidate& c : alive) {
    any_gpu = any_gpu || c.is_gpu;
    if (CanJoin(c)) ++per_host[c.host_id];
  }
  if (!any_gpu) {
    return "MEASURED communication needs GPU workers; the live workers are "
           "all CPU workers";
  }
  if (!backend_is_gpu) {
    return absl::StrCat(
        "MEASURED communication needs a GPU backend with "
        "NCCL; ",
        backend, " runs on the CPU");
  }
  int largest = 0;
  for (const auto& [host, count] : per_host) largest = std::max(largest, count);
  if (largest >= world) return "";
  return absl::StrCat("needs ", world, " GPU workers with ", backend,
                      " on one host; the largest host has ", largest);
}

}  // namespace moetune::coordinator
