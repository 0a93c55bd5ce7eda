// What the engine does differently in the sanitized build (BRIGADE_SANITIZE, tools/sanitize.sh).
#pragma once

// AddressSanitizer's build: g++ defines __SANITIZE_ADDRESS__, clang++ answers __has_feature.
#if defined(__SANITIZE_ADDRESS__)
#define BRIGADE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BRIGADE_ASAN 1
#endif
#endif

#if BRIGADE_ASAN
#include <sanitizer/lsan_interface.h>
#endif

namespace brigade {

// While one lives, LeakSanitizer reports nothing this thread allocates as leaked: around a call
// into a driver or layer that keeps memory it never frees (vk/commands.cpp says which), whose
// leak a suppression would otherwise match at every exit, after starting a symbolizer to name
// its allocation's first frame (a quarter of a second of each short sanitized run). The
// engine's own memory is never allocated under one. Nothing outside the sanitized build.
class LeaksNotReported {
 public:
#if BRIGADE_ASAN
  LeaksNotReported() { __lsan_disable(); }
  ~LeaksNotReported() { __lsan_enable(); }
#else
  LeaksNotReported() = default;
#endif
  LeaksNotReported(const LeaksNotReported&) = delete;
  LeaksNotReported& operator=(const LeaksNotReported&) = delete;
};

}  // namespace brigade
