// The cache files (io/cache_file.h): entries kept under their section through a save and a
// read, a file another cache or nothing of Brigade's wrote ignored with one warning, and the
// folder the caches live in.
#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/cache_file.h"

namespace io_cache_file_test {

using namespace brigade;
namespace fs = std::filesystem;

TEST_CASE("a cache file keeps its section's entries through a save, and ignores what it did not write") {
  const fs::path dir = fs::temp_directory_path() / ("brigade-cache-" + std::to_string(getpid()));
  const std::string path = (dir / "tilings.json").string();
  fs::remove_all(dir);
  {
    io::CacheFile file(path, "tiling", "tilings");
    CHECK(file.warning().empty());
    CHECK(file.find("device") == nullptr);
    file.put("device", {{"product", {{"tiling", "registers 8x8"}}}});
    file.put("gone", 1);
    file.erase("gone");
    CHECK(file.save().empty());  // the folder made too
  }
  {
    const io::CacheFile again(path, "tiling", "tilings");
    CHECK(again.warning().empty());
    REQUIRE(again.find("device") != nullptr);
    CHECK((*again.find("device"))["product"]["tiling"] == "registers 8x8");
    CHECK(again.find("gone") == nullptr);
    // Another kind of cache reads no entries from it, and says so.
    const io::CacheFile profiles(path, "profile", "profiles");
    CHECK(profiles.find("device") == nullptr);
    CHECK(profiles.warning() == path + " is not a profile cache Brigade wrote; ignored, and rewritten with new profiles");
  }
  std::ofstream(path) << "{ not json";
  io::CacheFile broken(path, "tiling", "tilings");
  CHECK(broken.find("device") == nullptr);
  CHECK(broken.warning().find("is not a tiling cache Brigade wrote") != std::string::npos);
  CHECK(broken.save().empty());  // rewritten whole
  CHECK(io::CacheFile(path, "tiling", "tilings").warning().empty());
  // JSON of the wrong shape: a version of another type, a section that is not an object.
  for (const char* text : {R"({"version":"1","tilings":{}})", R"({"version":null})", R"({"version":1,"tilings":[]})", "[1]"}) {
    CAPTURE(text);
    std::ofstream(path) << text;
    const io::CacheFile odd(path, "tiling", "tilings");
    CHECK(odd.find("device") == nullptr);
    CHECK(odd.warning().find("is not a tiling cache Brigade wrote") != std::string::npos);
  }
  // Valid JSON nested far deeper than a cache: refused as unreadable, not followed down.
  {
    const size_t n = 200000;
    std::ofstream(path) << R"({"version":1,"tilings":{"x":)" << std::string(n, '[') << std::string(n, ']') << "}}";
  }
  const io::CacheFile deep(path, "tiling", "tilings");
  CHECK(deep.find("x") == nullptr);
  CHECK(deep.warning().find("is not a tiling cache Brigade wrote") != std::string::npos);
  // Two processes that read the file before either saved: the second save keeps the first's
  // entries, and what one erased stays erased.
  {
    io::CacheFile one(path, "tiling", "tilings"), two(path, "tiling", "tilings");
    one.put("first", 1);
    two.put("second", 2);
    two.erase("device");
    CHECK(one.save().empty());
    CHECK(two.save().empty());
    const io::CacheFile both(path, "tiling", "tilings");
    CHECK(both.find("first") != nullptr);
    CHECK(both.find("second") != nullptr);
    CHECK(both.find("device") == nullptr);
    // A later save of the first carries only what it changed since its last: the second's
    // newer "first" stays.
    two.put("first", 3);
    CHECK(two.save().empty());
    one.put("third", 4);
    CHECK(one.save().empty());
    const io::CacheFile after(path, "tiling", "tilings");
    REQUIRE(after.find("first") != nullptr);
    CHECK(*after.find("first") == 3);
    CHECK(after.find("third") != nullptr);
  }
  // A link is written through and kept; a folder where the file would be is left alone.
  const std::string elsewhere = (dir / "elsewhere.json").string(), linked = (dir / "linked.json").string();
  fs::copy_file(path, elsewhere);
  fs::create_symlink(elsewhere, linked);
  {
    io::CacheFile through(linked, "tiling", "tilings");
    through.put("linked", 2);
    CHECK(through.save().empty());
  }
  CHECK(fs::is_symlink(linked));
  CHECK(io::CacheFile(elsewhere, "tiling", "tilings").find("linked") != nullptr);
  const std::string folder = (dir / "folder.json").string();
  fs::create_directories(folder + "/inside");
  io::CacheFile onto(folder, "tiling", "tilings");
  CHECK(onto.warning() == folder + " is a folder, not a tiling cache; ignored");
  onto.put("device", 1);
  CHECK(onto.save() == folder + " is a folder, not a regular file; not written over");
  CHECK(fs::is_directory(folder + "/inside"));
  // No path: a cache that keeps nothing and writes nothing.
  io::CacheFile none("", "tiling", "tilings");
  none.put("device", 1);
  CHECK(none.save().empty());
  fs::remove_all(dir);
}

TEST_CASE("the caches live in BRIGADE_CACHE_DIR, else XDG_CACHE_HOME's brigade, else HOME's .cache/brigade") {
  const char* names[] = {"BRIGADE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  std::string saved[3];
  bool had[3];
  for (int i = 0; i < 3; ++i)
    if ((had[i] = std::getenv(names[i]))) saved[i] = std::getenv(names[i]);
  setenv("HOME", "/home/u", 1);
  setenv("XDG_CACHE_HOME", "/xdg", 1);
  setenv("BRIGADE_CACHE_DIR", "/cache", 1);
  CHECK(io::cache_path("profiles.json") == "/cache/profiles.json");
  unsetenv("BRIGADE_CACHE_DIR");
  CHECK(io::cache_path("profiles.json") == "/xdg/brigade/profiles.json");
  unsetenv("XDG_CACHE_HOME");
  CHECK(io::cache_path("tilings.json") == "/home/u/.cache/brigade/tilings.json");
  unsetenv("HOME");
  CHECK(io::cache_path("tilings.json").empty());
  for (int i = 0; i < 3; ++i)
    if (had[i]) setenv(names[i], saved[i].c_str(), 1);
  CHECK(io::build_checksum().size() == 8);
  CHECK(io::checksum("") == "00000000");
  CHECK(io::checksum("123456789") == "cbf43926");  // CRC-32's check value
  CHECK(io::checksum("6789", io::checksum("12345")) == "cbf43926");  // in pieces
}

}  // namespace io_cache_file_test
