// The deploy units' command lines against the binaries they run: every flag
// a systemd unit or the Kubernetes manifest passes to moetune,
// moetune-coordinator or moetune-worker must be one that binary (and
// subcommand) knows, or the unit fails on the first night it runs.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/cluster.h"

namespace moetune::e2e {
namespace {

struct Invocation {
  std::string file, binary, subcommand;
  std::set<std::string> flags;
};

std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A line that continues the command above it: a shell continuation, a YAML
// list item or string of an args list, a chained command.
bool Continues(const std::string& line) {
  const size_t at = line.find_first_not_of(' ');
  if (at == std::string::npos) return false;
  const std::string t = line.substr(at);
  for (const char* lead : {"\"", "- ", "/opt/", "&&", "--", "args:", "["}) {
    if (t.rfind(lead, 0) == 0) return true;
  }
  return false;
}

// The text of each command: from a line naming /opt/moetune/ through the
// lines that continue it.
std::vector<std::string> CommandTexts(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream lines(text);
  std::string line, current;
  bool open = false;
  while (std::getline(lines, line)) {
    if (line.find("/opt/moetune/") != std::string::npos &&
        line.find('#') == std::string::npos) {
      if (open && !Continues(line)) out.push_back(current), current.clear();
      open = true;
      current += line + "\n";
    } else if (open && (Continues(line) || current.back() == '\\' ||
                        current.ends_with("\\\n"))) {
      current += line + "\n";
    } else if (open) {
      out.push_back(current), current.clear(), open = false;
    }
  }
  if (open) out.push_back(current);
  return out;
}

std::vector<Invocation> Invocations(const std::string& file) {
  static const std::regex kBinary(
      R"(/opt/moetune/(moetune[a-z-]*)\s*"?,?\s*"?([a-z]*))");
  static const std::regex kFlag(R"(--([a-z][a-z_]*))");
  std::vector<Invocation> out;
  for (const std::string& text : CommandTexts(Read(kSource + "/" + file))) {
    // A text may chain commands (sweep && compare): split at each binary.
    auto begin = std::sregex_iterator(text.begin(), text.end(), kBinary);
    std::vector<std::smatch> found(begin, std::sregex_iterator());
    for (size_t i = 0; i < found.size(); ++i) {
      Invocation inv{file, found[i][1], "", {}};
      if (inv.binary == "moetune") inv.subcommand = found[i][2];
      const size_t from = found[i].position(0) + found[i].length(0);
      const size_t to =
          i + 1 < found.size() ? found[i + 1].position(0) : text.size();
      const std::string args = text.substr(from, to - from);
      for (auto f = std::sregex_iterator(args.begin(), args.end(), kFlag);
           f != std::sregex_iterator(); ++f) {
        inv.flags.insert((*f)[1]);
      }
      out.push_back(inv);
    }
  }
  return out;
}

TEST(DeployUnitsTest, EveryFlagAUnitPassesIsOneItsBinaryKnows) {
  int checked = 0;
  for (const char* file :
       {"deploy/moetune-coordinator.service", "deploy/moetune-worker@.service",
        "deploy/moetune-sweep.service", "deploy/kubernetes.yaml"}) {
    for (const Invocation& inv : Invocations(file)) {
      const CommandResult help = RunCommand(kBin + "/" + inv.binary + " " +
                                            inv.subcommand + " --help");
      ASSERT_EQ(help.exit_code, 0) << inv.binary << " " << inv.subcommand;
      for (const std::string& flag : inv.flags) {
        const bool known =
            help.output.find("--" + flag + "=") != std::string::npos ||
            (flag.rfind("no", 0) == 0 &&
             help.output.find("--" + flag.substr(2) + "=") !=
                 std::string::npos);
        EXPECT_TRUE(known) << file << ": " << inv.binary << " "
                           << inv.subcommand << " has no --" << flag;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 20) << "the units' command lines were not found";
}

}  // namespace
}  // namespace moetune::e2e
