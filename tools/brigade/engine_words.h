// The engine names its settings in messages by their own names in backquotes (`micro_batches`,
// `memory_cap`: util/error.h); the command line writes each as the flag that sets it. One
// table, used for every message of the engine's that reaches the user: errors, the plan's
// problem, the links' reasons.
#pragma once

#include <string>
#include <string_view>

namespace brigade::cli {

// `message` with every engine setting the table knows written as its flag ("`remat` always"
// becomes "--remat always"); any other backquoted word is left as it is.
std::string in_flags(std::string_view message);

}  // namespace brigade::cli
