// The test programs' main: doctest's, with two options of Brigade's own, taken out of the
// arguments before doctest sees them (tests/CMakeLists.txt passes them per suite):
//   --device=SPEC          the physical device the tests run on (sets BRIGADE_TEST_DEVICE)
//   --each-subgroup-size   runs the program once per subgroup size that device offers
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "gpu.h"

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool each = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--each-subgroup-size") each = true;
    else if (a.rfind("--device=", 0) == 0) setenv("BRIGADE_TEST_DEVICE", a.c_str() + 9, 1);
    else args.push_back(argv[i]);
  }
  args.push_back(nullptr);
  if (each)
    if (const int status = brigade::test::run_each_subgroup_size(args.data()); status >= 0) return status;
  doctest::Context context(int(args.size() - 1), args.data());
  return context.run();
}
