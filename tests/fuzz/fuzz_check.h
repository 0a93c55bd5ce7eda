// What every harness holds the readers to: a refusal is a brigade::UserError whose message is
// one line naming the input. Anything else reaching the harness (another exception type, a
// crash, a sanitizer report) is a finding; this header turns a bad refusal into one too.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string_view>

#include "util/error.h"

namespace brigade::fuzz {

// Aborts (a finding) unless `e` is one line starting with one of `sources`.
inline void expect_clear(const UserError& e, std::initializer_list<std::string_view> sources) {
  const std::string_view what = e.what();
  if (what.find_first_of("\n\r") != std::string_view::npos) {
    std::fprintf(stderr, "refusal spans several lines:\n%s\n", e.what());
    std::abort();
  }
  for (std::string_view s : sources)
    if (what.substr(0, s.size()) == s) return;
  std::fprintf(stderr, "refusal does not name the input: %s\n", e.what());
  std::abort();
}

// Runs `f`, accepting a clear refusal; returns whether `f` finished.
template <class F>
bool attempt(F&& f, std::initializer_list<std::string_view> sources) {
  try {
    f();
    return true;
  } catch (const UserError& e) {
    expect_clear(e, sources);
    return false;
  }
}

}  // namespace brigade::fuzz
