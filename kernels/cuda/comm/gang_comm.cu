// GangComm (kernels/cuda/comm/comm_gpu.h): NCCL's communicator, created
// non-blocking under a deadline, and the one-shot all-reduce's peer buffers.
#include <nccl.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "kernels/cuda/base/cuda_util.cuh"
#include "kernels/cuda/comm/comm_gpu.h"
#include "kernels/cuda/comm/oneshot.cuh"

namespace moetune::gpu {
namespace {

using Clock = std::chrono::steady_clock;

// NVLink multicast can take a shared host's GPUs out of service: never on,
// whatever the environment says (docs/building.md).
void KeepMulticastOff() { setenv("NCCL_NVLS_ENABLE", "0", 1); }

std::string NcclError(const char* what, ncclResult_t result) {
  return std::string(what) + ": " + ncclGetErrorString(result);
}

// A non-blocking communicator's last call settles: success, an error, or
// the deadline (then the communicator is aborted by the caller).
ncclResult_t Settle(ncclComm_t comm, Clock::time_point deadline) {
  ncclResult_t state = ncclInProgress;
  while (true) {
    if (ncclCommGetAsyncError(comm, &state) != ncclSuccess)
      return ncclSystemError;
    if (state != ncclInProgress) return state;
    if (Clock::now() > deadline) return ncclInProgress;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

// The peer-visible allocation of the one-shot path, and this rank's own
// call counts and error word.
struct OneShotState {
  DeviceBuffer own;           // buffers + flags, shared with the peers
  DeviceBuffer epochs;        // [kOneShotBlocks] + the error word
  std::vector<void*> opened;  // peers' allocations mapped through IPC
  OneShotArgs args;
};

class RankComm final : public GangComm {
 public:
  RankComm(int device, int rank, int world, AllReduceImpl impl)
      : device_(device), rank_(rank), world_(world), impl_(impl) {}
  ~RankComm() override {
    cudaSetDevice(device_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (oneshot_ != nullptr) {
      for (void* p : oneshot_->opened) cudaIpcCloseMemHandle(p);
    }
    if (comm_ != nullptr) {
      // A communicator in error cannot be destroyed cleanly: abort it.
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state == ncclSuccess) {
        ncclCommDestroy(comm_);
      } else {
        ncclCommAbort(comm_);
      }
    }
  }
  int device() const override { return device_; }
  void* stream() const override { return stream_; }
  int rank() const override { return rank_; }
  int world() const override { return world_; }
  AllReduceImpl impl() const override { return impl_; }

  RunStatus AllReduceSum(float* data, int64_t n, void* stream,
                         std::string* error) override {
    cudaSetDevice(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    if (impl_ == AllReduceImpl::kOneShot) {
      return OneShot(OneShotOp::kAllReduce, data, data, n, s, error);
    }
    return Nccl(ncclAllReduce(data, data, n, ncclFloat32, ncclSum, comm_, s),
                "ncclAllReduce", error);
  }

  RunStatus AllGatherInPlace(void* buffer, int64_t bytes_per_rank, void* stream,
                             std::string* error) override {
    cudaSetDevice(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    if (impl_ == AllReduceImpl::kOneShot) {
      if (bytes_per_rank % 4 != 0) {
        *error = "one-shot all-gather: moves 4-byte words, got " +
                 std::to_string(bytes_per_rank) + " bytes a rank";
        return RunStatus::kBadProblem;
      }
      return OneShot(OneShotOp::kAllGather, buffer, buffer, bytes_per_rank / 4,
                     s, error);
    }
    char* base = static_cast<char*>(buffer);
    return Nccl(ncclAllGather(base + rank_ * bytes_per_rank, base,
                              bytes_per_rank, ncclUint8, comm_, s),
                "ncclAllGather", error);
  }

  RunStatus ReduceScatterSum(const float* in, float* out, int64_t n,
                             void* stream, std::string* error) override {
    cudaSetDevice(device_);
    const auto s = static_cast<cudaStream_t>(stream);
    if (impl_ == AllReduceImpl::kOneShot) {
      return OneShot(OneShotOp::kReduceScatter, in, out, n, s, error);
    }
    return Nccl(ncclReduceScatter(in, out, n, ncclFloat32, ncclSum, comm_, s),
                "ncclReduceScatter", error);
  }

  RunStatus Check(std::string* error) override {
    if (comm_ != nullptr) {
      ncclResult_t state = ncclSuccess;
      ncclCommGetAsyncError(comm_, &state);
      if (state != ncclSuccess && state != ncclInProgress) {
        *error = NcclError("NCCL communicator", state);
        return RunStatus::kCudaError;
      }
    }
    if (oneshot_ == nullptr) return RunStatus::kOk;
    uint32_t failed = 0;
    cudaSetDevice(device_);
    const cudaError_t e = cudaMemcpy(&failed, oneshot_->args.error,
                                     sizeof(failed), cudaMemcpyDeviceToHost);
    if (e != cudaSuccess || failed != 0) {
      *error = e != cudaSuccess
                   ? std::string("one-shot check: ") + cudaGetErrorString(e)
                   : "one-shot all-reduce: a peer did not arrive within 10 s";
      return RunStatus::kCudaError;
    }
    return RunStatus::kOk;
  }

  int device_, rank_, world_;
  AllReduceImpl impl_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  std::unique_ptr<OneShotState> oneshot_;
  int timeout_ms_ = 60000;

 private:
  // One call of the one-shot kernel, `words` a rank; an error names the
  // operation, and a message past the peer buffers says so.
  RunStatus OneShot(OneShotOp op, const void* in, void* out, int64_t words,
                    cudaStream_t stream, std::string* error) {
    const cudaError_t e =
        LaunchOneShot(oneshot_->args, op, in, out, words, stream);
    if (e == cudaSuccess) return RunStatus::kOk;
    const char* name = op == OneShotOp::kAllReduce   ? "all-reduce"
                       : op == OneShotOp::kAllGather ? "all-gather"
                                                     : "reduce-scatter";
    const int64_t parts = op == OneShotOp::kAllReduce ? 1 : world_;
    *error = std::string("one-shot ") + name + ": " + cudaGetErrorString(e) +
             (words * parts > oneshot_->args.max_floats
                  ? " (message above the buffer)"
                  : "");
    return RunStatus::kCudaError;
  }

  // Blocking on a non-blocking communicator: enqueued calls may answer
  // "in progress" until NCCL has taken them.
  RunStatus Nccl(ncclResult_t result, const char* call, std::string* error) {
    if (result == ncclInProgress) {
      result =
          Settle(comm_, Clock::now() + std::chrono::milliseconds(timeout_ms_));
    }
    if (result == ncclSuccess) return RunStatus::kOk;
    *error = NcclError(call, result);
    return RunStatus::kCudaError;
  }
};

// Allocates this rank's peer-visible buffers and its counters.
GpuStatus AllocateOneShot(RankComm* comm, int64_t max_floats) {
  MG_CUDA(LoadOneShotKernel());  // before any rank's kernel can spin
  auto state = std::make_unique<OneShotState>();
  MG_RETURN_IF_ERROR(state->own.Allocate(OneShotPeerBytes(max_floats)));
  MG_RETURN_IF_ERROR(
      state->epochs.Allocate((kOneShotBlocks + 1) * sizeof(uint32_t)));
  OneShotArgs& a = state->args;
  a.rank = comm->rank_;
  a.world = comm->world_;
  a.max_floats = max_floats;
  a.epochs = state->epochs.as<uint32_t>();
  a.error = a.epochs + kOneShotBlocks;
  comm->oneshot_ = std::move(state);
  return OkStatus();
}

// Points args at rank r's allocation `base`.
void SetPeer(OneShotArgs* a, int r, void* base) {
  a->buffers[r] = static_cast<float*>(base);
  a->flags[r] = reinterpret_cast<uint32_t*>(static_cast<char*>(base) +
                                            OneShotFlagsOffset(a->max_floats));
}

// Exchanges IPC handles through the gang's rendezvous and maps the peers'.
GpuStatus OpenPeers(RankComm* comm, const AllGatherBytes& exchange) {
  OneShotState& s = *comm->oneshot_;
  cudaIpcMemHandle_t handle;
  MG_CUDA(cudaIpcGetMemHandle(&handle, s.own.get()));
  std::vector<std::string> all;
  std::string why;
  if (!exchange(
          "oneshot-ipc",
          std::string(reinterpret_cast<const char*>(&handle), sizeof(handle)),
          &all, &why)) {
    return Fail(RunStatus::kUnavailable, "one-shot handles: " + why);
  }
  if (static_cast<int>(all.size()) != comm->world_) {
    return Fail(RunStatus::kBadProblem, "one-shot handles: wrong count");
  }
  for (int r = 0; r < comm->world_; ++r) {
    if (r == comm->rank_) {
      SetPeer(&s.args, r, s.own.get());
      continue;
    }
    if (all[r].size() != sizeof(handle)) {
      return Fail(RunStatus::kBadProblem, "one-shot handle of rank " +
                                              std::to_string(r) +
                                              " has the wrong size");
    }
    std::memcpy(&handle, all[r].data(), sizeof(handle));
    void* peer = nullptr;
    MG_CUDA(
        cudaIpcOpenMemHandle(&peer, handle, cudaIpcMemLazyEnablePeerAccess));
    s.opened.push_back(peer);
    SetPeer(&s.args, r, peer);
  }
  return OkStatus();
}

GpuStatus InitNccl(RankComm* comm, const GangCommSetup& setup) {
  ncclUniqueId id;
  if (setup.nccl_id.size() != sizeof(id)) {
    return Fail(RunStatus::kBadProblem,
                "nccl_id has " + std::to_string(setup.nccl_id.size()) +
                    " bytes; NCCL's id has " + std::to_string(sizeof(id)));
  }
  std::memcpy(&id, setup.nccl_id.data(), sizeof(id));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&comm->comm_, setup.world, id,
                                          setup.rank, &config);
  if (r == ncclInProgress || r == ncclSuccess) {
    r = Settle(comm->comm_,
               Clock::now() + std::chrono::milliseconds(setup.timeout_ms));
  }
  if (r == ncclSuccess) return OkStatus();
  const std::string why =
      r == ncclInProgress
          ? "NCCL communicator: not every rank joined within " +
                std::to_string(setup.timeout_ms) + " ms (aborted)"
          : NcclError("ncclCommInitRankConfig", r);
  if (comm->comm_ != nullptr) ncclCommAbort(comm->comm_);
  comm->comm_ = nullptr;
  return Fail(RunStatus::kCudaError, why);
}

}  // namespace

std::string NcclVersion() {
  int code = 0;
  if (ncclGetVersion(&code) != ncclSuccess || code <= 0) return "";
  // NCCL_VERSION(X, Y, Z) = X * 10000 + Y * 100 + Z from NCCL 2.9 on.
  return std::to_string(code / 10000) + "." + std::to_string(code / 100 % 100) +
         "." + std::to_string(code % 100);
}

RunStatus NewNcclId(std::string* id, std::string* error) {
  KeepMulticastOff();
  ncclUniqueId unique;
  const ncclResult_t r = ncclGetUniqueId(&unique);
  if (r != ncclSuccess) {
    *error = NcclError("ncclGetUniqueId", r);
    return RunStatus::kCudaError;
  }
  id->assign(reinterpret_cast<const char*>(&unique), sizeof(unique));
  return RunStatus::kOk;
}

std::unique_ptr<GangComm> CreateGangComm(const GangCommSetup& setup,
                                         const AllGatherBytes& exchange,
                                         std::string* error) {
  KeepMulticastOff();
  if (setup.world < 1 || setup.world > kOneShotMaxRanks || setup.rank < 0 ||
      setup.rank >= setup.world) {
    *error = "rank " + std::to_string(setup.rank) + " of world " +
             std::to_string(setup.world) + ": world must be in [1, " +
             std::to_string(kOneShotMaxRanks) + "] and rank below it";
    return nullptr;
  }
  auto comm = std::make_unique<RankComm>(setup.device, setup.rank, setup.world,
                                         setup.impl);
  comm->timeout_ms_ = setup.timeout_ms;
  GpuStatus status = [&]() -> GpuStatus {
    MG_CUDA(cudaSetDevice(setup.device));
    MG_CUDA(cudaStreamCreateWithFlags(&comm->stream_, cudaStreamNonBlocking));
    if (setup.impl == AllReduceImpl::kNccl) return InitNccl(comm.get(), setup);
    MG_RETURN_IF_ERROR(AllocateOneShot(comm.get(), setup.max_floats));
    return OpenPeers(comm.get(), exchange);
  }();
  if (!status.ok()) {
    *error = status.message;
    return nullptr;
  }
  return comm;
}

namespace {

// One-shot ranks of this process: peer pointers directly (same device) or
// through peer access (devices that reach each other).
GpuStatus LinkLocalOneShot(const std::vector<int>& devices,
                           std::vector<std::unique_ptr<GangComm>>* gang) {
  const int world = static_cast<int>(devices.size());
  for (int r = 0; r < world; ++r) {
    for (int p = 0; p < world; ++p) {
      if (devices[p] == devices[r]) continue;
      MG_CUDA(cudaSetDevice(devices[r]));
      const cudaError_t e = cudaDeviceEnablePeerAccess(devices[p], 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
        MG_CUDA(e);
      }
      cudaGetLastError();  // an already-enabled peer is not an error here
    }
  }
  for (auto& member : *gang) {
    auto* comm = static_cast<RankComm*>(member.get());
    for (int p = 0; p < world; ++p) {
      auto* peer = static_cast<RankComm*>((*gang)[p].get());
      SetPeer(&comm->oneshot_->args, p, peer->oneshot_->own.get());
    }
  }
  return OkStatus();
}

// NCCL over distinct devices of this process.
GpuStatus InitLocalNccl(const std::vector<int>& devices,
                        std::vector<std::unique_ptr<GangComm>>* gang) {
  std::vector<int> sorted = devices;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
    return Fail(RunStatus::kBadProblem, "NCCL refuses two ranks on one device");
  }
  std::vector<ncclComm_t> comms(devices.size());
  const ncclResult_t r = ncclCommInitAll(
      comms.data(), static_cast<int>(devices.size()), devices.data());
  if (r != ncclSuccess) {
    return Fail(RunStatus::kCudaError, NcclError("ncclCommInitAll", r));
  }
  for (size_t i = 0; i < comms.size(); ++i) {
    static_cast<RankComm*>((*gang)[i].get())->comm_ = comms[i];
  }
  return OkStatus();
}

}  // namespace

std::vector<std::unique_ptr<GangComm>> CreateLocalGang(
    const std::vector<int>& devices, AllReduceImpl impl, int64_t max_floats,
    std::string* error) {
  KeepMulticastOff();
  std::vector<std::unique_ptr<GangComm>> gang;
  const int world = static_cast<int>(devices.size());
  GpuStatus status = [&]() -> GpuStatus {
    if (world < 1 || world > kOneShotMaxRanks) {
      return Fail(RunStatus::kBadProblem, "a local gang has 1 to " +
                                              std::to_string(kOneShotMaxRanks) +
                                              " ranks");
    }
    for (int r = 0; r < world; ++r) {
      auto comm = std::make_unique<RankComm>(devices[r], r, world, impl);
      MG_CUDA(cudaSetDevice(devices[r]));
      MG_CUDA(cudaStreamCreateWithFlags(&comm->stream_, cudaStreamNonBlocking));
      if (impl == AllReduceImpl::kOneShot) {
        MG_RETURN_IF_ERROR(AllocateOneShot(comm.get(), max_floats));
      }
      gang.push_back(std::move(comm));
    }
    if (impl == AllReduceImpl::kNccl) return InitLocalNccl(devices, &gang);
    return LinkLocalOneShot(devices, &gang);
  }();
  if (!status.ok()) {
    *error = status.message;
    gang.clear();
  }
  return gang;
}

}  // namespace moetune::gpu
