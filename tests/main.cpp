// The test programs' main: doctest's, with options of Brigade's own, taken out of the
// arguments before doctest sees them (tests/CMakeLists.txt passes them per suite):
//   --device=SPEC          the physical device the tests run on (sets BRIGADE_TEST_DEVICE)
//   --each-subgroup-size   runs the program once per subgroup size that device offers
//   --share-devices        the cases of the run share their logical devices (gpu.h; sets
//                          BRIGADE_TEST_SHARE_DEVICES)
//   --max-groups=N         the launchers dispatch at most N workgroups a dimension (ops::
//                          max_groups), so that the kernels' loops over the rest run (sets
//                          BRIGADE_TEST_MAX_GROUPS)
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "gpu.h"
#include "ops/launch_geometry.h"

namespace {

// How many cases the run's filters selected, and those that said they cannot run here: no run
// may pass on a filter that selects none, and no run counts a case it did not run as passed.
// A case that cannot run here says so in a MESSAGE starting with one of these, and returns; a
// run none of whose cases failed then ends with kNotRunHere, which ctest counts skipped
// (SKIP_RETURN_CODE, tests/CMakeLists.txt). A failure is a failure whatever else was said.
const char* const kNotRunSays[] = {"not on this device:", "not in this build:", "two hosts unavailable:"};
unsigned selected_cases = 0;
std::vector<std::string> not_run;
std::string current_case;

struct Selected : doctest::IReporter {
  explicit Selected(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& s) override { selected_cases = s.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData& t) override { current_case = t.m_name; }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData& m) override {
    const std::string text = m.m_string.c_str();
    for (const char* prefix : kNotRunSays)
      if (text.rfind(prefix, 0) == 0) not_run.push_back(current_case + " (" + text + ")");
  }
  void test_case_skipped(const doctest::TestCaseData&) override {}
};
REGISTER_LISTENER("selected", 1, Selected);

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args;
  bool each = false;
  long expect = -1;  // --cases=N: exactly N cases must be selected
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--each-subgroup-size") each = true;
    else if (a.rfind("--cases=", 0) == 0) expect = std::stol(a.substr(8));
    else if (a.rfind("--device=", 0) == 0) setenv("BRIGADE_TEST_DEVICE", a.c_str() + 9, 1);
    else if (a == "--share-devices") setenv("BRIGADE_TEST_SHARE_DEVICES", "1", 1);
    else if (a.rfind("--max-groups=", 0) == 0) setenv("BRIGADE_TEST_MAX_GROUPS", a.c_str() + 13, 1);
    else args.push_back(argv[i]);
  }
  if (const char* groups = std::getenv("BRIGADE_TEST_MAX_GROUPS")) brigade::ops::max_groups() = uint32_t(std::stoul(groups));
  args.push_back(nullptr);
  if (each)
    if (const int status = brigade::test::run_each_subgroup_size(args.data()); status >= 0) return status;
  doctest::Context context(int(args.size() - 1), args.data());
  const int status = context.run();
  if (context.shouldExit()) return status;
  // ctest runs each case by its name (doctest_discover_tests): a name CMake cuts (at a ';',
  // its list separator) selects none, which must fail rather than pass having run nothing.
  if (selected_cases == 0) {
    std::fprintf(stderr, "no test case matched the filters\n");
    return 1;
  }
  // A run that names its cases by patterns (tests/CMakeLists.txt: brigade_unmapped) says how
  // many: a case renamed out of a pattern fails it rather than drop out unseen.
  if (expect >= 0 && long(selected_cases) != expect) {
    std::fprintf(stderr, "the filters matched %u test case(s), not the %ld expected\n", selected_cases, expect);
    return 1;
  }
  if (brigade::test::sharing_devices()) {
    // The shared devices' destruction, checked as each case's fixture checks its own.
    const std::vector<std::string> messages = brigade::test::release_shared_devices();
    if (!messages.empty()) {
      for (const std::string& m : messages) std::fprintf(stderr, "%s\n", m.c_str());
      std::fprintf(stderr, "the validation layer reported %zu message(s) destroying the shared devices\n",
                   messages.size());
      return 1;
    }
  }
  if (status == 0 && !not_run.empty()) {
    std::fprintf(stderr, "%zu case(s) not run here (ctest counts the run skipped):\n", not_run.size());
    for (const std::string& name : not_run) std::fprintf(stderr, "  %s\n", name.c_str());
    return brigade::test::kNotRunHere;
  }
  return status;
}
