// The gang's communication on the GPU: plain C++ (no CUDA, NCCL, abseil or
// gRPC headers), like moe_gpu.h, so the worker calls it from g++-compiled
// code; kernels/cuda/no_cuda.cc answers "built without CUDA" where there is no
// CUDA.
//
// A GangComm sums float buffers over the ranks of a gang (one process a
// rank, one GPU each) with one of two implementations: NCCL's all-reduce,
// or a one-shot all-reduce (kernels/cuda/comm/oneshot.cuh) where every rank
// reads every other rank's buffer over peer memory in one kernel, the CUDA
// IPC handles exchanged through the gang's rendezvous. The one-shot gang
// makes no NCCL communicator, so its ranks may also share a device (NCCL
// refuses that): how one GPU tests a gang of several processes. Both run on a
// stream and can be captured in a CUDA graph. Set-up runs under a deadline:
// NCCL's communicator is created non-blocking and aborted when the deadline
// passes, so a missing or dead rank becomes an error, never a stuck process.
// NVLink multicast stays off (NCCL_NVLS_ENABLE=0; docs/building.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/base/device.h"

namespace moetune::gpu {

enum class AllReduceImpl { kNccl, kOneShot };

// "nccl" / "" -> kNccl, "oneshot" -> kOneShot; false for anything else.
inline bool ParseAllReduceImpl(const std::string& name, AllReduceImpl* impl) {
  if (name.empty() || name == "nccl") {
    *impl = AllReduceImpl::kNccl;
    return true;
  }
  if (name != "oneshot") return false;
  *impl = AllReduceImpl::kOneShot;
  return true;
}
inline const char* AllReduceImplName(AllReduceImpl impl) {
  return impl == AllReduceImpl::kOneShot ? "oneshot" : "nccl";
}

// The NCCL this library links, "2.28.3" style; "" when none.
std::string NcclVersion();

// Rank 0 makes the gang's NCCL id (opaque bytes) and relays it to the others.
RunStatus NewNcclId(std::string* id, std::string* error);

// The ranks' exchange of bytes (the gang's rendezvous): every rank offers
// `mine` under `key` and gets every rank's offer, by rank.
using AllGatherBytes =
    std::function<bool(const std::string& key, const std::string& mine,
                       std::vector<std::string>* all, std::string* error)>;

struct GangCommSetup {
  int device = 0;
  int rank = 0, world = 1;
  std::string nccl_id;  // kNccl: NewNcclId's bytes from rank 0
  int timeout_ms = 60000;
  AllReduceImpl impl = AllReduceImpl::kNccl;
  // The largest message, in floats (the one-shot path's peer buffers): a
  // sum's, or all ranks' parts of a reduce-scatter or all-gather.
  int64_t max_floats = int64_t{1} << 16;
};

class GangComm {
 public:
  virtual ~GangComm() = default;
  virtual int device() const = 0;  // the CUDA ordinal it runs on
  virtual int rank() const = 0;
  virtual int world() const = 0;
  virtual AllReduceImpl impl() const = 0;
  // The rank's own stream (a cudaStream_t), made with the gang. Ranks that
  // share a process must each sum on theirs: streams made one after another
  // land on different hardware queues, where a one-shot kernel spinning for
  // its peers cannot hold a peer's kernel back behind it.
  virtual void* stream() const = 0;
  // Sums n floats (device memory) over the gang in place, on `stream` (a
  // cudaStream_t). Every rank calls the same sums in the same order.
  virtual RunStatus AllReduceSum(float* data, int64_t n, void* stream,
                                 std::string* error) = 0;
  // Data-parallel attention's MoE dispatch and combine, by NCCL or by the
  // one-shot kernel over peer memory (oneshot.cuh; then bytes_per_rank a
  // multiple of 4 and the message within max_floats). AllGatherInPlace:
  // rank r's `bytes_per_rank` bytes at buffer + r * bytes_per_rank go to
  // every rank's same place. ReduceScatterSum: in [world][n] floats summed
  // over the gang, rank r's row r into out [n].
  virtual RunStatus AllGatherInPlace(void* buffer, int64_t bytes_per_rank,
                                     void* stream, std::string* error) = 0;
  virtual RunStatus ReduceScatterSum(const float* in, float* out, int64_t n,
                                     void* stream, std::string* error) = 0;
  // After the stream's work: whether a collective failed (NCCL's
  // asynchronous error, or a one-shot peer that never arrived).
  virtual RunStatus Check(std::string* error) = 0;
};

// Rank `setup.rank`'s side of the gang (one process a rank): NCCL's
// communicator (and for kOneShot the peer buffers, their IPC handles
// exchanged through `exchange`), or nullptr with *error saying why.
std::unique_ptr<GangComm> CreateGangComm(const GangCommSetup& setup,
                                         const AllGatherBytes& exchange,
                                         std::string* error);

// Every rank of a gang in this process (benchmarks and tests): rank r on
// devices[r]. kNccl needs distinct devices (ncclCommInitAll); kOneShot also
// runs several ranks on one device (each its own buffers; the ranks' kernels
// must then run at once, which they do on an idle device), or on devices
// that can reach each other peer to peer.
std::vector<std::unique_ptr<GangComm>> CreateLocalGang(
    const std::vector<int>& devices, AllReduceImpl impl, int64_t max_floats,
    std::string* error);

// One rank's measurement of AllReduceSum at one size (each rank of the gang
// calls it at once, as nccl-tests does): `iterations` sums back to back on
// one stream after `warmup` (in one CUDA graph when in_graph), then one
// checked sum of rank-dependent data whose exact result is known. Ranks that
// share this process call `meet` (a barrier of theirs, or null) four times:
// after allocating, after capturing, after launching and before freeing,
// because allocation and copies hold the device or the context, which must
// neither wait for a one-shot kernel that waits for a rank not yet launched
// nor break a rank's capture.
struct AllReduceTiming {
  double time_us = 0;  // per sum
  int64_t wrong = 0;   // elements that differ from the exact sum
};
// The same for data-parallel attention's collectives, `floats` a rank: an
// all-gather of [world][floats] in place, a reduce-scatter of [world]
// [floats] into [floats]; checked against the exact gathers and sums of
// rank-dependent data (kAllReduce: TimeAllReduce).
enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter };
RunStatus TimeCollective(GangComm* comm, CollectiveOp op, int64_t floats,
                         int warmup, int iterations, bool in_graph,
                         const std::function<void()>& meet,
                         AllReduceTiming* out, std::string* error);
RunStatus TimeAllReduce(GangComm* comm, int64_t floats, int warmup,
                        int iterations, bool in_graph,
                        const std::function<void()>& meet, AllReduceTiming* out,
                        std::string* error);

}  // namespace moetune::gpu
