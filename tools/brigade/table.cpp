#include "table.h"

#include <algorithm>
#include <cstdio>

namespace brigade::cli {

void print_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  for (auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c)
      line += r[c] + (c + 1 < r.size() ? std::string(width[c] - r[c].size() + 2, ' ') : "");
    std::printf("%s\n", line.c_str());
  }
}

std::string fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

}  // namespace brigade::cli
