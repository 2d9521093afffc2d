// A protected coordinator, with the real binaries: TLS on both listeners,
// mutual TLS for workers, and bearer tokens with roles. The certificates
// are made here with the openssl command line tool.
#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/rpc/channel.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr char kReader[] = "reader-token-0123456789";
constexpr char kWriter[] = "writer-token-0123456789";
constexpr char kWorker[] = "worker-token-0123456789";

// A CA, a server certificate for 127.0.0.1 and a worker's client
// certificate, all signed by the CA; false when openssl is missing.
bool MakeCertificates(const fs::path& dir) {
  const std::string d = dir.string();
  const std::string key =
      " -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 "
      "-nodes -days 2";
  const std::string script =
      "cd " + d + " && set -e\n" + "openssl req -x509" + key +
      " -keyout ca.key -out ca.pem "
      "-subj /CN=moetune-test-ca\n" +
      "openssl req" + key +
      " -keyout server.key -out server.csr "
      "-subj /CN=localhost\n" +
      "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' > san.ext\n"
      "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -out server.pem -days 2 -extfile san.ext\n" +
      "openssl req" + key +
      " -keyout worker.key -out worker.csr "
      "-subj /CN=worker\n" +
      "openssl x509 -req -in worker.csr -CA ca.pem -CAkey ca.key "
      "-CAcreateserial -out worker.pem -days 2\n";
  std::ofstream(dir / "certs.sh") << script;
  const CommandResult made = RunCommand("sh " + d + "/certs.sh");
  return made.exit_code == 0;
}

class SecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = TempDir("security");
    if (RunCommand("openssl version").exit_code != 0 ||
        !MakeCertificates(dir_)) {
      GTEST_SKIP() << "no openssl to make test certificates";
    }
    std::ofstream(dir_ / "tokens") << "read " << kReader << "\nwrite "
                                   << kWriter << "\nworker " << kWorker << "\n";
    for (auto [file, token] : {std::pair{"reader.token", kReader},
                               {"writer.token", kWriter},
                               {"worker.token", kWorker}}) {
      std::ofstream(dir_ / file) << token << "\n";
    }
    CoordinatorFlags flags;
    flags.extra = {
        "--tls_cert=" + Path("server.pem"), "--tls_key=" + Path("server.key"),
        "--tls_client_ca=" + Path("ca.pem"), "--tokens_file=" + Path("tokens")};
    flags.client_tls_ca = Path("ca.pem");
    flags.client_token = kWriter;
    cluster_ = std::make_unique<Cluster>(dir_, flags);
  }
  std::string Path(const std::string& name) { return (dir_ / name).string(); }
  CommandResult Cli(const std::string& args) {
    return RunCommand("timeout 30 " + kBin + "/moetune " + args +
                      " --coordinator=" + cluster_->address());
  }

  fs::path dir_;
  std::unique_ptr<Cluster> cluster_;
};

TEST_F(SecurityTest, AWorkerWithItsCertificateAndTokenRunsASweep) {
  cluster_->AddWorker(
      "e2e:tls", "",
      {"--tls_ca=" + Path("ca.pem"), "--tls_cert=" + Path("worker.pem"),
       "--tls_key=" + Path("worker.key"),
       "--token_file=" + Path("worker.token")});
  const int64_t sweep_id = cluster_->Submit(TwelveTrialSpec());
  EXPECT_EQ(cluster_->WaitForEnd(sweep_id).state(), v1::FINISHED);
  EXPECT_EQ(cluster_->CountInState(sweep_id, v1::DONE), 12);
  const CommandResult listed =
      Cli("sweeps --format csv --tls_ca=" + Path("ca.pem") +
          " --token_file=" + Path("reader.token"));
  EXPECT_EQ(listed.exit_code, 0) << listed.output;
  EXPECT_THAT(listed.output, HasSubstr(",FINISHED,12,12,"));
}

TEST_F(SecurityTest, EachMissingCredentialIsRefused) {
  const std::string tls = " --tls_ca=" + Path("ca.pem");
  const CommandResult no_token = Cli("sweeps" + tls);
  EXPECT_EQ(no_token.exit_code, 1) << no_token.output;
  EXPECT_THAT(no_token.output, HasSubstr("bearer token"));
  const CommandResult reader_cancels =
      Cli("cancel --sweep=1" + tls + " --token_file=" + Path("reader.token"));
  EXPECT_EQ(reader_cancels.exit_code, 1) << reader_cancels.output;
  EXPECT_THAT(reader_cancels.output, HasSubstr("write"));
  const CommandResult plaintext =
      Cli("sweeps --token_file=" + Path("reader.token"));
  EXPECT_NE(plaintext.exit_code, 0) << plaintext.output;
  // A worker without a client certificate fails the TLS handshake.
  rpc::ChannelOptions options;
  options.tls_ca_file = Path("ca.pem");
  options.token = kWorker;
  auto channel = rpc::MakeChannel(cluster_->worker_address(), options);
  ASSERT_TRUE(channel.ok()) << channel.status();
  auto stub = v1::WorkerControl::NewStub(*channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  v1::RegisterWorkerRequest request;
  request.set_name("intruder:cpu");
  v1::RegisterWorkerResponse response;
  EXPECT_FALSE(stub->RegisterWorker(&context, request, &response).ok());
  // Nor does a certificate stand in for the token.
  const CommandResult tokenless_worker = RunCommand(
      "timeout 30 " + kBin + "/moetune-worker --device=cpu --coordinator=" +
      cluster_->worker_address() + " --tls_ca=" + Path("ca.pem") +
      " --tls_cert=" + Path("worker.pem") + " --tls_key=" + Path("worker.key"));
  EXPECT_EQ(tokenless_worker.exit_code, 1) << tokenless_worker.output;
  EXPECT_THAT(tokenless_worker.output, HasSubstr("`worker` role"));
}

// A worker whose TLS handshake is refused says so while it keeps retrying,
// instead of waiting silently for its registration timeout.
TEST_F(SecurityTest, AWorkerRefusedByTlsSaysSoWhileItRetries) {
  const CommandResult refused = RunCommand(
      "timeout 10 " + kBin + "/moetune-worker --device=cpu --coordinator=" +
      cluster_->worker_address() + " --tls_ca=" + Path("ca.pem") +
      " --token_file=" + Path("worker.token"));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_THAT(refused.output,
              HasSubstr("cannot register with the coordinator at " +
                        cluster_->worker_address()));
}

}  // namespace
}  // namespace moetune::e2e
