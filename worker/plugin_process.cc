#include "worker/plugin_process.h"

#include <utility>

#include "worker/warm_process.h"

namespace moetune::worker {
namespace {

class WarmPluginProcess final : public PluginProcess {
 public:
  explicit WarmPluginProcess(std::vector<std::string> command)
      : process_(std::move(command)) {}
  ChildOutcome Call(const std::string& request,
                    std::chrono::milliseconds deadline) override {
    return process_.Call(request, deadline, nullptr);
  }
  void Stop() override { process_.Stop(); }
  bool Alive() override { return process_.Alive(); }

 private:
  WarmProcess process_;
};

}  // namespace

std::unique_ptr<PluginProcess> MakeWarmPluginProcess(
    std::vector<std::string> command) {
  return std::make_unique<WarmPluginProcess>(std::move(command));
}

}  // namespace moetune::worker
