// safetensors files: parameters, gradients, checkpoints and batches (DESIGN.md, interop
// contract). The reader checks everything the format promises before trusting it: header
// length, JSON, dtypes, shapes and offsets, so a corrupt or hostile file is refused with one
// line naming the file and what is wrong. The writer replaces files atomically.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace brigade::io {

enum class DType { F64, F32, F16, BF16, I64, I32, I16, I8, U8, BOOL };

const char* dtype_name(DType d);
size_t dtype_size(DType d);

struct TensorInfo {
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
  uint64_t elements() const;
};

std::string shape_string(const std::vector<int64_t>& shape);  // "[128, 784]"

// The metadata key under which a writer may record the CRC-32 of its data section and its
// other metadata (contents_checksum; checkpoints do, io/checkpoint.h): a file that carries it
// is refused on reading where they differ.
inline constexpr const char* kChecksum = "crc32";
// That CRC-32: the data section's bytes, then each metadata entry but kChecksum's, in key
// order, as "key=value\n" (the key's and the value's lengths first, so no two sets of entries
// read alike).
std::string contents_checksum(std::span<const uint8_t> data, const std::map<std::string, std::string>& metadata);

class SafeTensors {
 public:
  static SafeTensors load(const std::string& path);
  // `source` names the bytes in error messages (a path, "batch", ...).
  static SafeTensors parse(std::vector<uint8_t> bytes, const std::string& source);

  const std::string& source() const { return source_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const { return tensors_.count(name) != 0; }
  const TensorInfo& info(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // F32 data; with `shape`, refuses a tensor of any other shape, naming both.
  std::vector<float> f32(const std::string& name) const;
  std::vector<float> f32(const std::string& name, const std::vector<int64_t>& shape) const;
  // Integer data (I32 or I64) as int32, refusing values outside [lo, hi).
  std::vector<int32_t> i32(const std::string& name, int64_t lo, int64_t hi) const;
  std::span<const uint8_t> bytes(const std::string& name) const;

 private:
  std::string source_;
  std::vector<uint8_t> file_;
  uint64_t data_start_ = 0;
  std::map<std::string, TensorInfo> tensors_;
  std::map<std::string, std::string> metadata_;
};

class SafeTensorsWriter {
 public:
  void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
           const void* data, size_t bytes);
  void add(const std::string& name, const std::vector<int64_t>& shape, std::span<const float> data);
  void add(const std::string& name, const std::vector<int64_t>& shape, std::span<const int32_t> data);
  void set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }
  // contents_checksum of what serialize() writes, for kChecksum.
  std::string checksum() const;
  std::vector<uint8_t> serialize() const;
  // Writes `path` atomically: a temporary file beside it, fsync, rename, fsync of the folder.
  // A crash at any point leaves either the old file or the new one, never a mix.
  void write(const std::string& path) const;

 private:
  struct Entry {
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> data;
  };
  std::map<std::string, Entry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// Refuses, as write_atomically would, a path it could not write (its folder missing, not a
// folder, or not writable; the path empty, or there and not a regular file: a folder, a
// device, a named pipe, a socket or a symbolic link, which the rename would replace), before
// the work whose result goes there; writes nothing.
void check_writable(const std::string& path);
// Replaces `path` with `bytes` atomically (see SafeTensorsWriter::write); refuses what
// check_writable refuses.
void write_atomically(const std::string& path, std::span<const uint8_t> bytes);
inline void write_atomically(const std::string& path, std::string_view text) {
  write_atomically(path, std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

}  // namespace brigade::io
