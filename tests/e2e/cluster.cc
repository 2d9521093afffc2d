#include "tests/e2e/cluster.h"

#include <dirent.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "common/rpc/channel.h"
#include "gtest/gtest.h"

namespace moetune::e2e {

namespace fs = std::filesystem;

fs::path TempDir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() /
                 ("moetune-e2e-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

v1::SweepSpec TwelveTrialSpec() {
  v1::SweepSpec spec;
  spec.set_name("e2e");
  spec.mutable_workload()->set_model_preset("tiny");
  spec.mutable_workload()->add_batch_sizes(1);
  spec.mutable_workload()->add_batch_sizes(3);
  spec.mutable_workload()->add_context_lengths(64);
  spec.mutable_workload()->set_region(v1::DECODE_STEP);
  spec.mutable_space()->add_moe_backends("cpu_reference");
  spec.mutable_space()->add_moe_backends("cpu_blocked");
  for (auto [n, k] : {std::pair{4, 64}, {8, 128}}) {
    v1::TileShape* tile = spec.mutable_space()->add_tiles();
    tile->set_block_n(n);
    tile->set_block_k(k);
  }
  spec.mutable_space()->add_tp(1);
  spec.mutable_space()->add_ep(1);
  spec.mutable_space()->add_ep(2);
  spec.mutable_measurement()->set_iterations(3);
  spec.mutable_measurement()->set_warmup_iterations(1);
  spec.mutable_measurement()->set_trial_timeout_s(60);
  return spec;
}

fs::path SlowWrapper(const fs::path& dir, double sleep_s) {
  const fs::path wrapper = dir / "slow.sh";
  std::ofstream(wrapper) << "#!/bin/sh\necho start >> '"
                         << (dir / "trial_starts.log").string() << "'\nsleep "
                         << sleep_s << "\nexec \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  return wrapper;
}

int TrialStarts(const fs::path& dir) {
  std::ifstream in(dir / "trial_starts.log");
  int lines = 0;
  for (std::string line; std::getline(in, line);) ++lines;
  return lines;
}

bool WaitFor(const std::function<bool()>& done, int timeout_ms) {
  const auto end =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (std::chrono::steady_clock::now() < end) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return done();
}

namespace {

std::string ReadWhole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

std::vector<pid_t> ProcessesWith(const std::string& needle) {
  std::vector<pid_t> found;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0 || pid == getpid()) continue;
    const std::string base = "/proc/" + std::string(entry->d_name);
    std::string cmdline = ReadWhole(base + "/cmdline");
    for (char& c : cmdline) c = c == '\0' ? ' ' : c;
    if (cmdline.find(needle) == std::string::npos) continue;
    // "pid (comm) S ...": the state follows the last ')'.
    const std::string stat = ReadWhole(base + "/stat");
    const size_t paren = stat.rfind(')');
    if (paren != std::string::npos && paren + 2 < stat.size() &&
        stat[paren + 2] == 'Z') {
      continue;
    }
    found.push_back(pid);
  }
  closedir(proc);
  return found;
}

Cluster::Cluster(const fs::path& dir, CoordinatorFlags flags)
    : dir_(dir), flags_(std::move(flags)) {
  StartCoordinator();
}

void Cluster::StartCoordinator() {
  std::vector<std::string> argv = {kBin + "/moetune-coordinator",
                                   "--listen=" + flags_.listen,
                                   "--worker_listen=" + flags_.worker_listen,
                                   "--db=" + db_path(),
                                   "--lease_ms=3000",
                                   "--heartbeat_ms=200"};
  argv.insert(argv.end(), flags_.extra.begin(), flags_.extra.end());
  coordinator_ = std::make_unique<Process>(
      argv,
      (dir_ / ("coordinator-" + std::to_string(restarts_) + ".log")).string());
  // "listening on A (workers on B)"
  const std::string line =
      coordinator_->ReadLineStartingWith("listening on ", 20000);
  const size_t workers = line.find(" (workers on ");
  ASSERT_NE(workers, std::string::npos) << "coordinator did not start";
  address_ = line.substr(0, workers);
  worker_address_ = line.substr(workers + 13, line.size() - workers - 14);
  rpc::ChannelOptions channel;
  channel.tls_ca_file = flags_.client_tls_ca;
  channel.token = flags_.client_token;
  auto made = rpc::MakeChannel(address_, channel);
  ASSERT_TRUE(made.ok()) << made.status();
  stub_ = v1::Moetune::NewStub(*made);
}

void Cluster::KillAndRestartCoordinator() {
  coordinator_->Signal(SIGKILL);
  coordinator_->Wait();
  flags_.listen = address_;
  flags_.worker_listen = worker_address_;
  ++restarts_;
  StartCoordinator();
}

void Cluster::AddWorker(const std::string& name, const std::string& wrapper,
                        const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {kBin + "/moetune-worker",
                                   "--coordinator=" + worker_address_,
                                   "--device=cpu", "--name=" + name};
  if (!wrapper.empty()) argv.push_back("--trial_wrapper=" + wrapper);
  argv.insert(argv.end(), extra.begin(), extra.end());
  worker_argv_.push_back(argv);
  worker_logs_.push_back(
      (dir_ / (name.substr(name.find(':') + 1) + ".log")).string());
  workers_.push_back(std::make_unique<Process>(argv, worker_logs_.back()));
}

void Cluster::KillAndRestartWorker(int i) {
  workers_[i]->Signal(SIGKILL);
  workers_[i]->Wait();
  workers_[i] = std::make_unique<Process>(worker_argv_[i], worker_logs_[i]);
}

int64_t Cluster::Submit(const v1::SweepSpec& spec) {
  grpc::ClientContext context;
  v1::SubmitSweepRequest request;
  *request.mutable_spec() = spec;
  v1::SubmitSweepResponse response;
  const grpc::Status status = stub_->SubmitSweep(&context, request, &response);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return response.sweep_id();
}

grpc::Status Cluster::Watch(int64_t sweep_id, v1::Sweep* last) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(180));
  v1::WatchSweepRequest request;
  request.set_sweep_id(sweep_id);
  auto reader = stub_->WatchSweep(&context, request);
  v1::SweepEvent event;
  while (reader->Read(&event)) {
    if (event.has_progress()) *last = event.progress();
  }
  return reader->Finish();
}

v1::Sweep Cluster::WaitForEnd(int64_t sweep_id) {
  v1::Sweep last;
  const grpc::Status status = Watch(sweep_id, &last);
  EXPECT_TRUE(status.ok()) << status.error_message();
  return last;
}

std::vector<v1::Trial> Cluster::Trials(int64_t sweep_id) {
  std::vector<v1::Trial> trials;
  v1::TrialFilter filter;
  filter.set_sweep_id(sweep_id);
  filter.set_include_samples(true);
  do {
    grpc::ClientContext context;
    v1::QueryTrialsResponse page;
    const grpc::Status status = stub_->QueryTrials(&context, filter, &page);
    EXPECT_TRUE(status.ok()) << status.error_message();
    if (!status.ok()) break;
    trials.insert(trials.end(), page.trials().begin(), page.trials().end());
    filter.set_page_token(page.next_page_token());
  } while (!filter.page_token().empty());
  return trials;
}

int Cluster::CountInState(int64_t sweep_id, v1::TrialState state) {
  int count = 0;
  for (const v1::Trial& t : Trials(sweep_id)) count += t.state() == state;
  return count;
}

}  // namespace moetune::e2e
