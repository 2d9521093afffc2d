// The gang's rendezvous over real gRPC: a coordinator on port 0, two GPU
// worker registrations on one host, a MEASURED trial granted to both, and
// each rank's GrpcGangRendezvous (as a trial process runs it) meeting the
// other through WorkerControl.Rendezvous.
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/coordinator/loopback_options.h"
#include "tests/coordinator/test_helpers.h"
#include "worker/grpc_gang_rendezvous.h"

namespace moetune::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

class GangRpcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_ = *CoordinatorServer::Start(LoopbackOptions(), RealClock::Get());
    channel_ = grpc::CreateChannel(server_->worker_address(),
                                   grpc::InsecureChannelCredentials());
    workers_ = v1::WorkerControl::NewStub(channel_);
  }
  // Registers `n` GPU workers on one host, each idle; submits a MEASURED
  // trial of world n; returns each rank's execution as its agent makes it.
  std::vector<v1::TrialExecution> GangOf(int n) {
    std::vector<v1::RegisterWorkerResponse> registered(n);
    for (int i = 0; i < n; ++i) {
      v1::RegisterWorkerRequest request;
      request.set_name(absl::StrCat("host-a:", i));
      *request.mutable_probe() = CpuWorkerProbe();
      request.mutable_probe()->mutable_device()->set_is_gpu(true);
      request.mutable_probe()->mutable_device()->set_host_id("host-a");
      request.mutable_probe()->mutable_backends(2)->set_available(true);
      grpc::ClientContext context;
      EXPECT_TRUE(
          workers_->RegisterWorker(&context, request, &registered[i]).ok());
      EXPECT_FALSE(Acquire(registered[i]).granted());
    }
    Submit(n);
    std::vector<v1::TrialExecution> executions(n);
    for (const v1::RegisterWorkerResponse& worker : registered) {
      const v1::AcquireTrialResponse grant = Acquire(worker);
      EXPECT_TRUE(grant.granted());
      v1::TrialExecution& e = executions[grant.gang().rank()];
      *e.mutable_trial() = grant.trial();
      *e.mutable_gang() = grant.gang();
      e.set_coordinator_address(server_->worker_address());
      e.set_worker_id(worker.worker_id());
      e.set_token(worker.token());
    }
    return executions;
  }
  v1::AcquireTrialResponse Acquire(const v1::RegisterWorkerResponse& worker) {
    v1::AcquireTrialRequest request;
    request.set_worker_id(worker.worker_id());
    request.set_token(worker.token());
    v1::AcquireTrialResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(workers_->AcquireTrial(&context, request, &response).ok());
    return response;
  }
  void Submit(int world) {
    auto stub = v1::Moetune::NewStub(grpc::CreateChannel(
        server_->address(), grpc::InsecureChannelCredentials()));
    v1::SubmitSweepRequest request;
    v1::SweepSpec& spec = *request.mutable_spec();
    spec.mutable_workload()->set_model_preset("tiny");
    spec.mutable_workload()->add_batch_sizes(1);
    spec.mutable_workload()->add_context_lengths(16);
    spec.mutable_workload()->set_region(v1::MOE_LAYER);
    spec.mutable_space()->add_moe_backends("fused_gemv");
    spec.mutable_space()->add_tp(world);
    spec.mutable_space()->add_communication(v1::MEASURED);
    v1::SubmitSweepResponse response;
    grpc::ClientContext context;
    ASSERT_TRUE(stub->SubmitSweep(&context, request, &response).ok());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::WorkerControl::Stub> workers_;
};

TEST_F(GangRpcTest, RanksMeetThroughTheCoordinator) {
  const std::vector<v1::TrialExecution> ranks = GangOf(2);
  std::vector<absl::StatusOr<std::vector<std::string>>> got(
      2, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      worker::GrpcGangRendezvous rendezvous(channel_, ranks[r]);
      got[r] = rendezvous.AllGather("nccl-id", r == 0 ? "unique-id" : "",
                                    absl::Now() + absl::Seconds(20));
    });
  }
  for (std::thread& t : threads) t.join();
  for (const auto& answer : got) {
    ASSERT_TRUE(answer.ok()) << answer.status();
    EXPECT_THAT(*answer, ElementsAre("unique-id", ""));
  }
}

TEST_F(GangRpcTest, ABadTokenIsRefused) {
  std::vector<v1::TrialExecution> ranks = GangOf(2);
  ranks[1].set_token("forged");
  worker::GrpcGangRendezvous rendezvous(channel_, ranks[1]);
  const auto refused =
      rendezvous.AllGather("nccl-id", "", absl::Now() + absl::Seconds(5));
  EXPECT_TRUE(absl::IsUnauthenticated(refused.status())) << refused.status();
  EXPECT_THAT(std::string(refused.status().message()),
              HasSubstr("rendezvous 'nccl-id'"));
}

}  // namespace
}  // namespace moetune::coordinator
