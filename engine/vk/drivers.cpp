#include "vk/drivers.h"

#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

#include "vk/check.h"

#ifndef BRIGADE_DRIVERS_DIR
#define BRIGADE_DRIVERS_DIR ""
#endif

namespace brigade::vk {
namespace {

constexpr const char* kSystemLavapipe = "lvp_icd.*";  // the glob VK_LOADER_DRIVERS_DISABLE takes

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

// `list` split at `sep` without `item`, then `item` appended when `add`: a process started by
// one that already chose must neither list the manifest twice nor keep a choice it reverses.
void set_list_item(const char* name, char sep, const std::string& item, bool add) {
  std::vector<std::string> kept;
  const std::string list = env(name);
  for (size_t begin = 0; begin <= list.size();) {
    size_t end = list.find(sep, begin);
    if (end == std::string::npos) end = list.size();
    std::string part = list.substr(begin, end - begin);
    if (!part.empty() && part != item) kept.push_back(part);
    begin = end + 1;
  }
  if (add) kept.push_back(item);
  std::string joined;
  for (auto& p : kept) joined += (joined.empty() ? "" : std::string(1, sep)) + p;
  if (joined == list) return;
  if (joined.empty())
    unsetenv(name);
  else
    setenv(name, joined.c_str(), 1);
}

LavapipeChoice decide() {
  const std::string dir = BRIGADE_DRIVERS_DIR "/lavapipe";
  const std::string manifest = dir + "/lavapipe_icd.json";
  LavapipeChoice c;
  std::ifstream version_file(dir + "/VERSION");
  std::getline(version_file, c.version);
  const bool present = !c.version.empty() && std::ifstream(manifest).good();

  const std::string want = env("BRIGADE_LAVAPIPE");
  if (!want.empty() && want != "system" && want != "project")
    throw UserError("BRIGADE_LAVAPIPE is '" + want + "'; it takes 'system' (the machine's lavapipe) "
                    "or 'project' (the one tools/install-lavapipe.sh fetched, the default)");
  if (!env("VK_DRIVER_FILES").empty() || !env("VK_ICD_FILENAMES").empty())
    c.why = "the drivers VK_DRIVER_FILES or VK_ICD_FILENAMES names";
  else if (want == "system")
    c.why = "the system's lavapipe (BRIGADE_LAVAPIPE=system)";
  else if (!present)
    c.why = "the system's lavapipe (" + dir + " holds none: tools/install-lavapipe.sh)";
  else
    c.project = true;
  if (want == "project" && !c.project)
    throw UserError("BRIGADE_LAVAPIPE=project, but Brigade loads " + c.why);
  if (c.project) c.why = c.version + "'s lavapipe from " + dir + " (BRIGADE_LAVAPIPE=system for the system's)";

  set_list_item("VK_ADD_DRIVER_FILES", ':', manifest, c.project);
  set_list_item("VK_LOADER_DRIVERS_DISABLE", ',', kSystemLavapipe, c.project);
  return c;
}

}  // namespace

const LavapipeChoice& choose_lavapipe() {
  static std::once_flag once;
  static LavapipeChoice choice;
  std::call_once(once, [] { choice = decide(); });
  return choice;
}

}  // namespace brigade::vk
