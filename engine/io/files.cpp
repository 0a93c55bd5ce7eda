#include "io/files.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "io/idx.h"
#include "util/error.h"

namespace brigade::io {

std::string not_regular(const std::string& path, bool follow_links) {
  struct stat st;
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0 || S_ISREG(st.st_mode)) return "";
  if (S_ISDIR(st.st_mode)) return "is a folder";
  if (S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) return "is a device";
  if (S_ISFIFO(st.st_mode)) return "is a named pipe";
  if (S_ISSOCK(st.st_mode)) return "is a socket";
  if (S_ISLNK(st.st_mode)) {
    std::string target(4096, '\0');
    const ssize_t n = ::readlink(path.c_str(), target.data(), target.size());
    return "is a symbolic link" + (n > 0 ? " (to " + target.substr(0, size_t(n)) + ")" : std::string());
  }
  return "is not a regular file";
}

std::vector<uint8_t> read_file(const std::string& path) {
  // A device (/dev/zero) has no end to read to; a pipe has one.
  const std::string what = not_regular(path, true);
  if (what == "is a folder") throw UserError(path + ": is a folder; expected a file");
  if (!what.empty() && what != "is a named pipe") throw UserError(path + ": " + what + ", not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw UserError(path + ": cannot open (" + std::strerror(errno) + ")");
  std::vector<uint8_t> bytes;
  std::error_code ec;
  const uintmax_t size = std::filesystem::file_size(path, ec);  // a hint: a pipe has none
  if (!ec) bytes.reserve(size);
  constexpr size_t kPiece = size_t(1) << 20;
  const auto piece = std::make_unique<char[]>(kPiece);
  do {
    f.read(piece.get(), kPiece);
    bytes.insert(bytes.end(), piece.get(), piece.get() + f.gcount());
  } while (f);
  if (f.bad()) throw UserError(path + ": read failed (" + std::strerror(errno) + ")");
  return bytes;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
  std::vector<uint8_t> bytes = read_file(path);
  if (bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b) bytes = gunzip(bytes, path);
  return bytes;
}

FolderLock::FolderLock(const std::string& dir, double wait, const std::string& name) {
  const std::string path = dir + "/" + name;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(path + ": cannot open the folder's lock (" + std::strerror(errno) + ")");
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(wait);
  int locked;
  while ((locked = ::flock(fd_, LOCK_EX | LOCK_NB)) != 0 && errno == EWOULDBLOCK && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (locked == 0) return;
  const int error = errno;
  if (error == EWOULDBLOCK) {
    ::close(fd_);
    throw UserError(dir + ": another process is writing this folder");
  }
  unheld_ = std::string("its file system takes no lock (") + std::strerror(error) + ")";  // ENOLCK, EOPNOTSUPP
}

FolderLock::~FolderLock() { ::close(fd_); }

}  // namespace brigade::io
