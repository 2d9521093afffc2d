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

namespace {

using Members = std::vector<const GangCandidate*>;

// The asker first (it is asking now: its grant is this answer), then the
// longest waiting; worker id breaks ties.
void RankOrder(const std::string& asker, Members& members) {
  std::sort(members.begin(), members.end(),
            [&asker](const GangCandidate* a, const GangCandidate* b) {
              return std::make_tuple(a->worker_id != asker, a->idle_since_ms,
                                     a->worker_id) <
                     std::make_tuple(b->worker_id != asker, b->idle_since_ms,
                                     b->worker_id);
            });
}

// Whether host `a` is preferred to host `b` (both ranked): more idle
// workers, then the asker's host, then the one waiting longest.
bool Preferred(const std::string& asker, const Members& a, const Members& b) {
  if (a.size() != b.size()) return a.size() > b.size();
  const bool a_asks = a[0]->worker_id == asker;
  const bool b_asks = b[0]->worker_id == asker;
  if (a_asks != b_asks) return a_asks;
  return std::tie(a[0]->idle_since_ms, a[0]->worker_id) <
         std::tie(b[0]->idle_since_ms, b[0]->worker_id);
}

}  // namespace

std::vector<std::string> PlaceGang(const GangCandidate& asker,
                                   const std::vector<GangCandidate>& others,
                                   int world) {
  if (world < 1) return {};  // a gang of one is the asker alone
  std::map<std::string, Members> by_host;
  if (CanJoin(asker)) by_host[asker.host_id].push_back(&asker);
  for (const GangCandidate& c : others) {
    if (c.worker_id != asker.worker_id && c.idle && CanJoin(c)) {
      by_host[c.host_id].push_back(&c);
    }
  }
  const Members* best = nullptr;
  for (auto& [host, members] : by_host) {
    if (static_cast<int>(members.size()) < world) continue;
    RankOrder(asker.worker_id, members);
    if (best == nullptr || Preferred(asker.worker_id, members, *best)) {
      best = &members;
    }
  }
  if (best == nullptr) return {};
  std::vector<std::string> ranks;
  for (int r = 0; r < world; ++r) ranks.push_back((*best)[r]->worker_id);
  return ranks;
}

std::string GangBackendRefusal(const std::string& backend,
                               const backends::BackendDescriptor* descriptor) {
  if (descriptor == nullptr) {
    return absl::StrCat(
        "MEASURED communication needs a native GPU backend with NCCL; ",
        backend, " is an out-of-process backend, which runs one rank's shard");
  }
  if (!descriptor->is_gpu()) {
    return absl::StrCat(
        "MEASURED communication needs a GPU backend with NCCL; ", backend,
        " runs on the CPU");
  }
  return "";
}

std::string GangShortfall(const std::vector<GangCandidate>& alive,
                          const std::string& backend,
                          const std::string& backend_refusal, int world) {
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
  if (!backend_refusal.empty()) return backend_refusal;
  int largest = 0;
  for (const auto& [host, count] : per_host) largest = std::max(largest, count);
  if (largest >= world) return "";
  return absl::StrCat("needs ", world, " GPU workers with ", backend,
                      " on one host; the largest host has ", largest);
}

}  // namespace moetune::coordinator
