// In-process gRPC tests: a CoordinatorServer on port 0 with an in-memory
// store, called through real stubs, with a real WorkerAgent running trials
// in-process.
#include <thread>

#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/registry.h"
#include "tests/coordinator/test_helpers.h"
#include "worker/agent.h"
#include "worker/cpu_backend.h"

namespace moetune::coordinator {
namespace {

using ::testing::HasSubstr;

v1::SweepSpec TinySpec() {
  v1::SweepSpec spec;
  spec.set_name("service-test");
  spec.mutable_workload()->set_model_preset("tiny");
  spec.mutable_workload()->add_batch_sizes(1);
  spec.mutable_workload()->add_batch_sizes(2);
  spec.mutable_workload()->add_context_lengths(16);
  spec.mutable_workload()->set_region(v1::MOE_LAYER);
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_space()->add_moe_backends("cpu_blocked");
  spec.mutable_space()->add_moe_backends("fused_gemv");
  spec.mutable_measurement()->set_iterations(3);
  spec.mutable_measurement()->set_warmup_iterations(1);
  return spec;
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.db_path = ":memory:";
    options.scheduler.lease_ms = 5000;
    options.scheduler.heartbeat_interval_ms = 100;
    server_ = *CoordinatorServer::Start(options, RealClock::Get());
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    stub_ = v1::Moetune::NewStub(channel_);
  }

  // Runs a real agent (trials in-process) until `trials` have run.
  void RunWorker(int trials) {
    worker::BackendRegistry registry;
    for (const char* name : {"cpu_reference", "cpu_blocked"}) {
      registry.Register(worker::MakeCpuBackend(*backends::FindBackend(name),
                                               backends::FindCpuMoe(name),
                                               RealClock::Get()));
    }
    worker::TrialRunner runner(&registry);
    worker::InProcessExecutor executor(&runner);
    worker::AgentOptions options;
    options.name = "test:cpu";
    options.idle_poll_ms = 20;
    options.max_trials = trials;
    worker::WorkerAgent agent(channel_, options, CpuWorkerProbe(), &executor);
    ASSERT_TRUE(agent.Run().ok());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Moetune::Stub> stub_;
};

TEST_F(ServiceTest, BadSpecIsInvalidArgumentNamingTheField) {
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = TinySpec();
  request.mutable_spec()->mutable_space()->set_moe_backends(0, "warp_drive");
  v1::SubmitSweepResponse response;
  const grpc::Status status = stub_->SubmitSweep(&context, request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("space.moe_backends[0]"));
  EXPECT_THAT(status.error_message(), HasSubstr("cpu_blocked"));
  grpc::ClientContext list_context;
  v1::ListSweepsResponse sweeps;
  ASSERT_TRUE(stub_->ListSweeps(&list_context, {}, &sweeps).ok());
  EXPECT_EQ(sweeps.sweeps_size(), 0);
}

TEST_F(ServiceTest, SweepRunsThroughAWorkerAndIsExplained) {
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = TinySpec();
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(stub_->SubmitSweep(&context, request, &submitted).ok());
  EXPECT_EQ(submitted.trial_count(), 6);
  RunWorker(4);  // the two fused_gemv trials become UNAVAILABLE on the way

  grpc::ClientContext watch_context;
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(submitted.sweep_id());
  auto reader = stub_->WatchSweep(&watch_context, watch);
  v1::SweepEvent event;
  int finished = 0;
  while (reader->Read(&event)) finished += event.has_trial() ? 1 : 0;
  EXPECT_TRUE(reader->Finish().ok());
  EXPECT_EQ(finished, 6);
  EXPECT_EQ(event.progress().state(), v1::FINISHED);

  grpc::ClientContext query_context;
  v1::TrialFilter filter;
  filter.set_sweep_id(submitted.sweep_id());
  filter.set_state(v1::DONE);
  v1::QueryTrialsResponse done;
  ASSERT_TRUE(stub_->QueryTrials(&query_context, filter, &done).ok());
  ASSERT_EQ(done.trials_size(), 4);
  for (const v1::Trial& t : done.trials()) {
    EXPECT_EQ(t.result().samples_us_size(), 3);
    EXPECT_GT(t.result().roofline().floor_us(), 0);
    EXPECT_EQ(t.result().worker_id(), "w:test:cpu");
  }

  grpc::ClientContext best_context;
  v1::GetBestRequest best_request;
  best_request.set_sweep_id(submitted.sweep_id());
  v1::GetBestResponse best;
  ASSERT_TRUE(stub_->GetBest(&best_context, best_request, &best).ok());
  EXPECT_EQ(best.workloads_size(), 2);
  EXPECT_TRUE(best.workloads(0).has_runner_up());
  ASSERT_EQ(best.excluded_size(), 1);
  EXPECT_EQ(best.excluded(0).backend(), "fused_gemv");
  EXPECT_THAT(best.excluded(0).reason(), HasSubstr("built without CUDA"));

  grpc::ClientContext workers_context;
  v1::ListWorkersResponse workers;
  ASSERT_TRUE(stub_->ListWorkers(&workers_context, {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).probe().fingerprint().device_name(), "test cpu");
}

TEST_F(ServiceTest, GetBestNeedsASweepOrWorkload) {
  grpc::ClientContext context;
  v1::GetBestResponse best;
  const grpc::Status status = stub_->GetBest(&context, {}, &best);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("sweep_id"));
}

TEST_F(ServiceTest, HealthServiceAnswers) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, {}, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace moetune::coordinator
