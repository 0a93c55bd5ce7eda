// Plain-text tables for the brigade program's output: columns padded to their widest cell.
#pragma once

#include <string>
#include <vector>

namespace brigade::cli {

void print_table(const std::vector<std::vector<std::string>>& rows);
// `v` with `digits` decimals: a table cell.
std::string fixed(double v, int digits);

}  // namespace brigade::cli
