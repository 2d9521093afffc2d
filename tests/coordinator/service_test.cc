// In-process gRPC tests: a CoordinatorServer on port 0 with an in-memory
// store, called through real stubs, with a real WorkerAgent running trials
// in-process.
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "common/rpc/channel.h"
#include "coordinator/server.h"
#include "gmock/gmock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/generic/generic_stub.h"
#include "gtest/gtest.h"
#include "kernels/backends/cpu/cpu_registry.h"
#include "kernels/backends/registry.h"
#include "tests/coordinator/loopback_options.h"
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
    server_ = *CoordinatorServer::Start(LoopbackOptions(), RealClock::Get());
    channel_ = grpc::CreateChannel(server_->address(),
                                   grpc::InsecureChannelCredentials());
    worker_channel_ = grpc::CreateChannel(server_->worker_address(),
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
    worker::WorkerAgent agent(worker_channel_, options, CpuWorkerProbe(),
                              &executor);
    ASSERT_TRUE(agent.Run().ok());
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;         // the public API
  std::shared_ptr<grpc::Channel> worker_channel_;  // WorkerControl
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

// A trial leased while a client watches moves no trial to a final state,
// yet the watcher hears of it: a progress event counting it LEASED.
TEST_F(ServiceTest, WatchersHearOfLeasesBeforeAnyTrialEnds) {
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = TinySpec();
  v1::SubmitSweepResponse submitted;
  ASSERT_TRUE(stub_->SubmitSweep(&context, request, &submitted).ok());
  grpc::ClientContext watch_context;
  v1::WatchSweepRequest watch;
  watch.set_sweep_id(submitted.sweep_id());
  auto reader = stub_->WatchSweep(&watch_context, watch);
  v1::SweepEvent event;
  ASSERT_TRUE(reader->Read(&event));  // the snapshot: nothing leased
  EXPECT_EQ(event.progress().trial_counts().count("LEASED"), 0);

  auto workers = v1::WorkerControl::NewStub(worker_channel_);
  grpc::ClientContext register_context;
  v1::RegisterWorkerRequest worker;
  worker.set_name("test:cpu");
  *worker.mutable_probe() = CpuWorkerProbe();
  v1::RegisterWorkerResponse registered;
  ASSERT_TRUE(
      workers->RegisterWorker(&register_context, worker, &registered).ok());
  grpc::ClientContext acquire_context;
  v1::AcquireTrialRequest acquire;
  acquire.set_worker_id(registered.worker_id());
  acquire.set_token(registered.token());
  v1::AcquireTrialResponse leased;
  ASSERT_TRUE(workers->AcquireTrial(&acquire_context, acquire, &leased).ok());
  ASSERT_TRUE(leased.granted());

  ASSERT_TRUE(reader->Read(&event));
  EXPECT_FALSE(event.has_trial());
  EXPECT_EQ(event.progress().trial_counts().at("LEASED"), 1);
  watch_context.TryCancel();
  reader->Finish();
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
  v1::QueryTrialsResponse summary;
  ASSERT_TRUE(stub_->QueryTrials(&query_context, filter, &summary).ok());
  ASSERT_EQ(summary.trials_size(), 4);
  EXPECT_EQ(summary.trials(0).result().samples_us_size(), 0);  // not asked
  EXPECT_EQ(summary.trials(0).result().stats().samples(), 3);
  grpc::ClientContext samples_context;
  filter.set_include_samples(true);
  v1::QueryTrialsResponse done;
  ASSERT_TRUE(stub_->QueryTrials(&samples_context, filter, &done).ok());
  ASSERT_EQ(done.trials_size(), 4);
  for (const v1::Trial& t : done.trials()) {
    EXPECT_EQ(t.result().samples_us_size(), 3);
    EXPECT_GT(t.result().roofline().floor_us(), 0);
    EXPECT_THAT(t.result().worker_id(), ::testing::StartsWith("w:test:cpu/"));
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

// A request whose bytes protobuf refuses (here a name that is not valid
// UTF-8) is INVALID_ARGUMENT saying so, not gRPC's INTERNAL with no words.
TEST_F(ServiceTest, AnUnparsableRequestIsInvalidArgumentSayingSo) {
  grpc::GenericStub generic(channel_);
  // SubmitSweepRequest{spec: SweepSpec{name: "\xff\xfe"}} by hand.
  const std::string bytes("\x0a\x04\x0a\x02\xff\xfe", 6);
  grpc::Slice slice(bytes);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&context, "/moetune.v1.Moetune/SubmitSweep",
                    grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> lock(mu);
                      status = std::move(s);
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> lock(mu);
  cv.wait(lock, [&] { return done; });
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("could not be parsed"));
}

TEST_F(ServiceTest, HealthServiceAnswers) {
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckResponse response;
  ASSERT_TRUE(health->Check(&context, {}, &response).ok());
  EXPECT_EQ(response.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

// WorkerControl lives on its own listener only.
TEST_F(ServiceTest, WorkerControlIsNotServedOnThePublicPort) {
  auto on_public = v1::WorkerControl::NewStub(channel_);
  grpc::ClientContext context;
  v1::RegisterWorkerRequest request;
  request.set_name("intruder:0");
  v1::RegisterWorkerResponse response;
  EXPECT_EQ(
      on_public->RegisterWorker(&context, request, &response).error_code(),
      grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_NE(server_->address(), server_->worker_address());
}

// List RPCs page; raw samples only when asked for.
TEST_F(ServiceTest, TrialsAndSweepsComeInPages) {
  for (int i = 0; i < 3; ++i) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = TinySpec();
    v1::SubmitSweepResponse submitted;
    ASSERT_TRUE(stub_->SubmitSweep(&context, request, &submitted).ok());
  }
  std::vector<int64_t> seen;
  v1::TrialFilter filter;
  filter.set_page_size(4);
  int pages = 0;
  do {
    grpc::ClientContext context;
    v1::QueryTrialsResponse page;
    ASSERT_TRUE(stub_->QueryTrials(&context, filter, &page).ok());
    EXPECT_LE(page.trials_size(), 4);
    for (const v1::Trial& t : page.trials()) seen.push_back(t.trial_id());
    filter.set_page_token(page.next_page_token());
    ++pages;
  } while (!filter.page_token().empty() && pages < 100);
  EXPECT_EQ(seen.size(), 18u);  // 3 sweeps of 6, each once
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 18u);
  EXPECT_EQ(pages, 5);

  v1::ListSweepsRequest list;
  list.set_page_size(2);
  grpc::ClientContext first_context, second_context;
  v1::ListSweepsResponse first, second;
  ASSERT_TRUE(stub_->ListSweeps(&first_context, list, &first).ok());
  ASSERT_EQ(first.sweeps_size(), 2);
  list.set_page_token(first.next_page_token());
  ASSERT_TRUE(stub_->ListSweeps(&second_context, list, &second).ok());
  ASSERT_EQ(second.sweeps_size(), 1);
  EXPECT_TRUE(second.next_page_token().empty());

  v1::TrialFilter bad;
  bad.set_page_size(20000);
  grpc::ClientContext bad_context;
  v1::QueryTrialsResponse refused;
  const grpc::Status status = stub_->QueryTrials(&bad_context, bad, &refused);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("filter.page_size"));
}

// Bearer tokens with roles guard both listeners.
class AuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_path_ = ::testing::TempDir() + "moetune_auth_tokens";
    std::ofstream(tokens_path_) << "# role token\n"
                                << "read reader-token-0001\n"
                                << "write writer-token-0001\n"
                                << "worker worker-token-0001\n";
    ServerOptions options = LoopbackOptions();
    options.tokens_file = tokens_path_;
    server_ = *CoordinatorServer::Start(options, RealClock::Get());
  }
  void TearDown() override { std::filesystem::remove(tokens_path_); }

  std::unique_ptr<v1::Moetune::Stub> Public(const std::string& token) {
    return v1::Moetune::NewStub(
        *rpc::MakeChannel(server_->address(), {.token = token}));
  }
  grpc::StatusCode Submit(const std::string& token) {
    grpc::ClientContext context;
    v1::SubmitSweepRequest request;
    *request.mutable_spec() = TinySpec();
    v1::SubmitSweepResponse response;
    return Public(token)
        ->SubmitSweep(&context, request, &response)
        .error_code();
  }
  grpc::StatusCode List(const std::string& token) {
    grpc::ClientContext context;
    v1::ListSweepsResponse response;
    return Public(token)->ListSweeps(&context, {}, &response).error_code();
  }
  grpc::StatusCode RegisterWorker(const std::string& token) {
    auto stub = v1::WorkerControl::NewStub(
        *rpc::MakeChannel(server_->worker_address(), {.token = token}));
    grpc::ClientContext context;
    v1::RegisterWorkerRequest request;
    request.set_name("h:cpu");
    v1::RegisterWorkerResponse response;
    return stub->RegisterWorker(&context, request, &response).error_code();
  }

  std::string tokens_path_;
  std::unique_ptr<CoordinatorServer> server_;
};

TEST_F(AuthTest, EachRoleReachesOnlyItsMethods) {
  EXPECT_EQ(List(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(List("made-up"), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(Submit(""), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(RegisterWorker(""), grpc::StatusCode::UNAUTHENTICATED);

  EXPECT_EQ(List("reader-token-0001"), grpc::StatusCode::OK);
  EXPECT_EQ(Submit("reader-token-0001"), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_EQ(RegisterWorker("reader-token-0001"),
            grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(Submit("writer-token-0001"), grpc::StatusCode::OK);
  EXPECT_EQ(List("writer-token-0001"), grpc::StatusCode::OK);
  EXPECT_EQ(RegisterWorker("writer-token-0001"),
            grpc::StatusCode::PERMISSION_DENIED);

  EXPECT_EQ(RegisterWorker("worker-token-0001"), grpc::StatusCode::OK);
  EXPECT_EQ(List("worker-token-0001"), grpc::StatusCode::PERMISSION_DENIED);
}

TEST(AuthorizerTest, AMalformedTokensFileNamesTheLine) {
  const auto bad = Authorizer::Parse(
      "read abcdefghijklmnopq\nadmin abcdefghijklmnopq\n", "tokens.txt");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("tokens.txt:2"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("read, write or worker"));
  const auto missing = Authorizer::Load("/nonexistent/tokens");
  EXPECT_THAT(std::string(missing.status().message()),
              HasSubstr("/nonexistent/tokens"));
  EXPECT_FALSE(Authorizer().enabled());
  EXPECT_TRUE(Authorizer().CheckToken("", Role::kWrite).ok());
}

}  // namespace
}  // namespace moetune::coordinator
