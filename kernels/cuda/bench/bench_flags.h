// What the benchmarks' `--flag=a,b,c` values share: a comma-separated list.
#pragma once

#include <string>
#include <vector>

namespace moetune::gpu {

// "a,b,,c" -> {"a", "b", "c"} (empty items dropped).
inline std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = text.find(',', start);
    const size_t end = comma == std::string::npos ? text.size() : comma;
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace moetune::gpu
