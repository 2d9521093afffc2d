// A stand-in for a warm trial process in warm_process_test: serves frames
// on stdin, answering "<pid>:<request>", except for requests that make it
// misbehave: "crash" aborts, "hang" sleeps, "quit" exits 0 without a reply,
// "noisy" writes to stderr first, "bye" replies and then exits.
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "worker/frames.h"

int main() {
  using moetune::worker::EncodeFrame;
  std::string request;
  while (moetune::worker::ReadFrame(STDIN_FILENO, &request)) {
    if (request == "crash") std::abort();
    if (request == "hang") sleep(60);
    if (request == "quit") return 0;
    if (request == "noisy") {
      moetune::worker::WriteAll(STDERR_FILENO, "something went wrong\n");
    }
    const std::string reply = std::to_string(getpid()) + ":" + request;
    if (!moetune::worker::WriteAll(STDOUT_FILENO, EncodeFrame(reply))) return 3;
    if (request == "bye") return 0;
  }
  return 0;
}
