#include "util/env.h"

#include <cstdlib>

#include "util/error.h"

namespace brigade {

std::string env_choice(const char* name, std::initializer_list<const char*> choices) {
  const char* env = std::getenv(name);
  const std::string value = env ? env : *choices.begin();
  std::string expected;
  size_t i = 0;
  for (const char* c : choices) {
    if (value == c) return value;
    expected += std::string(i == 0 ? "" : i + 1 == choices.size() ? " or " : ", ") + c;
    ++i;
  }
  throw UserError(std::string(name) + " is '" + value + "'; expected " + expected);
}

}  // namespace brigade
