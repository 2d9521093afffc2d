#include "coordinator/cli/worker_binary.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/spawn_argv.h"
#include "coordinator/cli/local_cluster.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace moetune::cli {
namespace {

// Reads fd to its end.
std::string ReadAll(int fd) {
  std::string out;
  char buffer[65536];
  while (true) {
    const ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n > 0) {
      out.append(buffer, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      return out;
    }
  }
}

}  // namespace

std::string WorkerBinary(const std::string& override_path) {
  return override_path.empty() ? SelfDirectory() + "/moetune-worker"
                               : override_path;
}

absl::StatusOr<std::string> CaptureStdout(
    const std::vector<std::string>& argv) {
  const std::string command = absl::StrJoin(argv, " ");
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe: ", std::strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], 1);
  std::vector<char*> args = SpawnArgv(argv);
  pid_t pid = -1;
  const int rc =
      posix_spawn(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    return absl::NotFoundError(
        absl::StrCat("cannot run ", command, ": ", std::strerror(rc)));
  }
  std::string out = ReadAll(pipe_fds[0]);
  close(pipe_fds[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    return absl::InternalError(
        absl::StrCat(command, " failed (status ", status, ")"));
  }
  return out;
}

absl::StatusOr<int> CountGpus(const std::string& worker_binary) {
  absl::StatusOr<std::string> out =
      CaptureStdout({worker_binary, "--count_gpus"});
  if (!out.ok()) return out.status();
  int count = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*out), &count)) {
    return absl::InternalError(absl::StrCat(
        worker_binary, " --count_gpus printed '", *out, "', not a count"));
  }
  return count;
}

absl::StatusOr<v1::Probe> ProbeDevice(
    const std::string& worker_binary, const std::string& device,
    const std::vector<std::string>& extra_flags) {
  std::vector<std::string> argv = {worker_binary, "--probe_only",
                                   absl::StrCat("--device=", device)};
  argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
  absl::StatusOr<std::string> json = CaptureStdout(argv);
  if (!json.ok()) return json.status();
  v1::Probe probe;
  const auto parsed =
      google::protobuf::util::JsonStringToMessage(*json, &probe);
  if (!parsed.ok()) {
    return absl::InternalError(absl::StrCat(
        worker_binary, " --probe_only printed no probe: ", parsed.ToString()));
  }
  return probe;
}

}  // namespace moetune::cli
