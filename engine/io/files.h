// Whole files into memory, read in large pieces (not a byte at a time through a stream
// iterator, which costs seconds for Fashion-MNIST's files in a sanitized build).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace brigade::io {

// A whole file's bytes. UserError naming `path` when it is a folder or cannot be opened or read.
std::vector<uint8_t> read_file(const std::string& path);

// read_file's bytes, gunzipped when the file is gzip (io/idx.h's gunzip).
std::vector<uint8_t> read_bytes(const std::string& path);

// What is at `path` where it is there and not a regular file, in words ("is a folder", "is a
// device", "is a named pipe", "is a socket", "is a symbolic link (to T)"), else "". A link is
// followed where `follow_links`.
std::string not_regular(const std::string& path, bool follow_links);

// An exclusive lock (flock) on a folder while the object lives, for the one process that
// writes it, taken on the file DIR/.lock, or DIR/NAME (a file, opened for writing, which
// NFS's emulation of flock needs): a second process asking for it gets a UserError naming the folder once `wait`
// seconds have passed without it. The kernel lets it go when the process ends, however it
// ends (a process that follows one being killed may wait for that). Where the file system
// takes no locks, the object holds none and unheld() says why.
class FolderLock {
 public:
  explicit FolderLock(const std::string& dir, double wait = 0, const std::string& name = ".lock");
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;
  const std::string& unheld() const { return unheld_; }

 private:
  int fd_ = -1;
  std::string unheld_;
};

}  // namespace brigade::io
