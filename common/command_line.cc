#include "common/command_line.h"

#include <iostream>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/build_info.h"

namespace moetune {
namespace {

bool IsHelp(absl::string_view name) {
  return name == "help" || name == "h" || name == "helpfull" ||
         name == "helpshort" || name == "?";
}

// The flag `name` names, with abseil's "--noflag" for a boolean false.
const absl::CommandLineFlag* FindFlag(absl::string_view name, bool* negated) {
  *negated = false;
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag == nullptr && absl::StartsWith(name, "no")) {
    flag = absl::FindCommandLineFlag(name.substr(2));
    if (flag != nullptr && !flag->IsOfType<bool>()) return nullptr;
    *negated = flag != nullptr;
  }
  return flag != nullptr && !flag->IsRetired() ? flag : nullptr;
}

// Whether `value` parses for `flag`: a copy of the flag is not available,
// so the parse goes into the flag itself, which abseil parses again.
absl::Status CheckValue(const absl::CommandLineFlag& flag,
                        absl::string_view value) {
  std::string error;
  if (const_cast<absl::CommandLineFlag&>(flag).ParseFrom(value, &error)) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "--", flag.Name(), ": '", value, "' is not a valid value (", error, ")"));
}

// One flag argument (without its dashes, not --help or --version); a
// non-boolean flag without "=" takes argv[*i + 1] as its value, which is
// appended to `joined` after an "=".
absl::Status CheckFlag(absl::string_view arg, int argc, const char* const* argv,
                       int* i, std::string* joined) {
  const size_t eq = arg.find('=');
  const absl::string_view name = arg.substr(0, eq);
  bool negated = false;
  const absl::CommandLineFlag* flag = FindFlag(name, &negated);
  if (flag == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  }
  if (eq != absl::string_view::npos) {
    if (negated) {
      return absl::InvalidArgumentError(
          absl::StrCat("--", name, ": takes no value"));
    }
    return CheckValue(*flag, arg.substr(eq + 1));
  }
  if (flag->IsOfType<bool>()) return absl::OkStatus();
  if (*i + 1 >= argc) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", name, ": missing its value"));
  }
  absl::StrAppend(joined, "=", argv[++*i]);
  return CheckValue(*flag, argv[*i]);
}

}  // namespace

absl::StatusOr<CommandLineCheck> CheckCommandLine(int argc,
                                                  const char* const* argv) {
  CommandLineCheck check;
  if (argc > 0) check.args.emplace_back(argv[0]);
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    check.args.emplace_back(arg);
    if (arg == "--") {
      for (++i; i < argc; ++i) {
        check.positional.emplace_back(argv[i]);
        check.args.emplace_back(argv[i]);
      }
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      check.positional.emplace_back(arg);
      continue;
    }
    arg.remove_prefix(arg[1] == '-' ? 2 : 1);
    const absl::string_view name = arg.substr(0, arg.find('='));
    if (IsHelp(name)) {
      check.help = true;
    } else if (name == "version") {
      check.version = true;
    } else {
      const absl::Status status =
          CheckFlag(arg, argc, argv, &i, &check.args.back());
      if (!status.ok()) return status;
    }
  }
  return check;
}

std::string DescribeFlags(const std::vector<std::string>& names,
                          const std::map<std::string, std::string>& help) {
  std::string text;
  for (const std::string& name : names) {
    const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) continue;
    const std::string default_value = flag->DefaultValue();
    const auto own = help.find(name);
    absl::StrAppend(&text, "  --", name, "=",
                    default_value.empty() ? "\"\"" : default_value, "\n      ",
                    own == help.end() ? flag->Help() : own->second, "\n");
  }
  return text;
}

std::string VersionLine(const std::string& program) {
  return absl::StrCat(program, " ", Version(), " (build ", BuildHash(), ")");
}

int HandleCommandLine(int argc, char** argv, const std::string& program,
                      const std::string& usage) {
  const absl::StatusOr<CommandLineCheck> check = CheckCommandLine(argc, argv);
  if (!check.ok()) {
    std::cerr << program << ": " << check.status().message() << "\n"
              << "run '" << program << " --help' for the flags\n";
    return 2;
  }
  if (check->help) {
    std::cout << usage;
    return 0;
  }
  if (check->version) {
    std::cout << VersionLine(program) << "\n";
    return 0;
  }
  return -1;
}

}  // namespace moetune
