#include "worker/gang_comm_setup.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/log.h"
#include "common/status_macros.h"

namespace moetune::worker {
namespace {

// Rank 0's NCCL id, as every rank of the gang receives it.
absl::StatusOr<std::string> RelayNcclId(GpuApi* gpu, const GangJoin& join,
                                        GangRendezvous* rendezvous,
                                        absl::Time deadline) {
  std::string id;
  if (join.gang->rank() == 0) {
    std::string error;
    if (gpu->NewNcclId(&id, &error) != gpu::RunStatus::kOk) {
      return absl::UnavailableError(absl::StrCat("NCCL id: ", error));
    }
  }
  absl::StatusOr<std::vector<std::string>> all =
      rendezvous->AllGather("nccl-id", id, deadline);
  if (!all.ok()) return all.status();
  if (all->empty() || (*all)[0].empty()) {
    return absl::InternalError("the gang's rendezvous relayed no NCCL id");
  }
  return (*all)[0];
}

// The GPU library's implementation of the config's all-reduce.
absl::StatusOr<gpu::AllReduceImpl> ImplOf(v1::AllReduceImpl impl) {
  switch (impl) {
    case v1::ALL_REDUCE_IMPL_UNSPECIFIED:
    case v1::ALL_REDUCE_NCCL:
      return gpu::AllReduceImpl::kNccl;
    case v1::ALL_REDUCE_ONESHOT:
      return gpu::AllReduceImpl::kOneShot;
    default:
      return absl::InvalidArgumentError(
          absl::StrCat("config.all_reduce_impl: ", impl,
                       " is not allowed; allowed: ALL_REDUCE_NCCL, "
                       "ALL_REDUCE_ONESHOT"));
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<gpu::GangComm>> JoinGang(
    GpuApi* gpu, const GangJoin& join, GangRendezvous* rendezvous) {
  gpu::GangCommSetup setup;
  ASSIGN_OR_RETURN(setup.impl, ImplOf(join.all_reduce));
  const absl::Time deadline = absl::Now() + join.timeout;
  setup.device = join.device;
  setup.rank = join.gang->rank();
  setup.world = join.gang->world_size();
  setup.max_floats = join.max_floats;
  setup.timeout_ms = static_cast<int>(absl::ToInt64Milliseconds(join.timeout));
  LogInfo("gang ", join.gang->gang_id(), " rank ", setup.rank, " of ",
          setup.world, ": joining (", gpu::AllReduceImplName(setup.impl), ")");
  if (setup.impl == gpu::AllReduceImpl::kNccl) {
    absl::StatusOr<std::string> id =
        RelayNcclId(gpu, join, rendezvous, deadline);
    if (!id.ok()) return id.status();
    setup.nccl_id = *id;
    LogInfo("gang ", join.gang->gang_id(), " rank ", setup.rank,
            ": NCCL id relayed");
  }
  absl::Status exchange_status;
  auto exchange = [&](const std::string& key, const std::string& mine,
                      std::vector<std::string>* all, std::string* error) {
    absl::StatusOr<std::vector<std::string>> got =
        rendezvous->AllGather(key, mine, deadline);
    if (!got.ok()) {
      exchange_status = got.status();
      *error = std::string(got.status().message());
      return false;
    }
    *all = std::move(*got);
    return true;
  };
  std::string error;
  std::unique_ptr<gpu::GangComm> comm =
      gpu->CreateGangComm(setup, exchange, &error);
  if (comm != nullptr) {
    LogInfo("gang ", join.gang->gang_id(), " rank ", setup.rank,
            ": communicator ready");
    return comm;
  }
  if (!exchange_status.ok()) return exchange_status;
  return absl::UnavailableError(
      absl::StrCat("the gang's communicator: ", error));
}

}  // namespace moetune::worker
