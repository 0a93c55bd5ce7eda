#include "io/safetensors.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <tuple>
#include <nlohmann/json.hpp>

#include "io/checksum.h"
#include "io/files.h"
#include "util/error.h"

namespace brigade::io {
namespace {

constexpr uint64_t kMaxHeader = 100ull << 20;  // the format's own limit

struct DTypeName {
  DType dtype;
  const char* name;
  size_t size;
};
constexpr DTypeName kDTypes[] = {
    {DType::F64, "F64", 8}, {DType::F32, "F32", 4}, {DType::F16, "F16", 2}, {DType::BF16, "BF16", 2},
    {DType::I64, "I64", 8}, {DType::I32, "I32", 4}, {DType::I16, "I16", 2}, {DType::I8, "I8", 1},
    {DType::U8, "U8", 1},   {DType::BOOL, "BOOL", 1},
};

// Quoted input in an error message, cut short when long: the message stays one readable line.
std::string brief(std::string text) {
  constexpr size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax) + "...";
  return text;
}
std::string brief(const nlohmann::json& value) { return brief(value.dump()); }

}  // namespace

const char* dtype_name(DType d) {
  for (auto& t : kDTypes)
    if (t.dtype == d) return t.name;
  return "?";
}

size_t dtype_size(DType d) {
  for (auto& t : kDTypes)
    if (t.dtype == d) return t.size;
  return 0;
}

uint64_t TensorInfo::elements() const {
  uint64_t n = 1;
  for (int64_t d : shape) n *= uint64_t(d);
  return n;
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

SafeTensors SafeTensors::load(const std::string& path) {
  return parse(read_file(path), path);
}

SafeTensors SafeTensors::parse(std::vector<uint8_t> bytes, const std::string& source) {
  auto bad = [&](const std::string& why) {
    return UserError(source + ": not a valid safetensors file: " + why);
  };
  SafeTensors st;
  st.source_ = source;
  if (bytes.size() < 8) throw bad("shorter than the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[size_t(i)];
  if (n > kMaxHeader) throw bad("header length " + std::to_string(n) + " is over the 100 MiB limit");
  if (n > bytes.size() - 8)
    throw bad("header length " + std::to_string(n) + " runs past the end of the " +
              std::to_string(bytes.size()) + "-byte file");
  st.data_start_ = 8 + n;
  const uint64_t data_size = bytes.size() - st.data_start_;

  nlohmann::json header;
  try {
    header = nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + long(8 + n));
  } catch (const nlohmann::json::exception& e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 1, column 2: ...".
    std::string why = e.what();
    if (const size_t end = why.find("] "); why.starts_with("[json.exception.") && end != std::string::npos)
      why.erase(0, end + 2);
    throw bad("the " + std::to_string(n) + "-byte header is not JSON (" + why + ")");
  }
  if (!header.is_object()) throw bad("the header is not a JSON object");

  struct Range {
    uint64_t begin, end;
    std::string name;
    bool operator<(const Range& o) const {
      return std::tie(begin, end, name) < std::tie(o.begin, o.end, o.name);
    }
  };
  std::vector<Range> ranges;
  for (auto& [name, value] : header.items()) {
    if (name == "__metadata__") {
      if (!value.is_object()) throw bad("__metadata__ is not an object of strings");
      for (auto& [k, v] : value.items()) {
        if (!v.is_string()) throw bad("metadata '" + brief(k) + "' is " + brief(v) + ", not a string");
        st.metadata_[k] = v.get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + brief(name) + "'";
    if (!value.is_object()) throw bad(where + " is not an object {\"dtype\", \"shape\", \"data_offsets\"}");
    for (const char* key : {"dtype", "shape", "data_offsets"})
      if (!value.contains(key)) throw bad(where + " has no \"" + key + "\"");
    TensorInfo t;
    const auto& dt = value["dtype"];
    bool known = false;
    if (dt.is_string())
      for (auto& d : kDTypes)
        if (dt.get<std::string>() == d.name) t.dtype = d.dtype, known = true;
    if (!known) {
      std::string names;
      for (auto& d : kDTypes) names += std::string(names.empty() ? "" : ", ") + d.name;
      throw bad(where + " has unknown dtype " + brief(dt) + " (expected one of " + names + ")");
    }
    const auto& shape = value["shape"];
    if (!shape.is_array()) throw bad(where + " shape " + brief(shape) + " is not an array of non-negative integers");
    uint64_t elements = 1;
    for (auto& d : shape) {
      if (!d.is_number_unsigned())
        throw bad(where + " shape " + brief(shape) + " has dimension " + brief(d) +
                  "; expected non-negative integers");
      const uint64_t dim = d.get<uint64_t>();
      if (dim && elements > std::numeric_limits<uint64_t>::max() / 8 / dim)
        throw bad(where + " shape " + brief(shape) + " overflows: more elements than any file can hold");
      elements *= dim;
      t.shape.push_back(int64_t(dim));
    }
    const auto& off = value["data_offsets"];
    if (!off.is_array() || off.size() != 2 || !off[0].is_number_unsigned() || !off[1].is_number_unsigned())
      throw bad(where + " data_offsets " + brief(off) + " is not [begin, end] in bytes");
    t.begin = off[0].get<uint64_t>();
    t.end = off[1].get<uint64_t>();
    if (t.begin > t.end || t.end > data_size)
      throw bad(where + " data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
                "] fall outside the " + std::to_string(data_size) + "-byte data section");
    if (t.end - t.begin != elements * dtype_size(t.dtype))
      throw bad(where + " holds " + std::to_string(t.end - t.begin) + " bytes but " +
                dtype_name(t.dtype) + " " + shape_string(t.shape) + " needs " +
                std::to_string(elements * dtype_size(t.dtype)));
    ranges.push_back({t.begin, t.end, name});
    st.tensors_[name] = std::move(t);
  }
  // The format's promise: the tensors fill the data section in order, with no gap and no
  // overlap, so no byte of the file is unaccounted for or shared.
  std::sort(ranges.begin(), ranges.end());
  uint64_t at = 0;
  for (size_t i = 0; i < ranges.size(); ++i) {
    const Range& r = ranges[i];
    if (r.begin < at)
      throw bad("tensors '" + brief(ranges[i - 1].name) + "' [" + std::to_string(ranges[i - 1].begin) + ", " +
                std::to_string(ranges[i - 1].end) + "] and '" + brief(r.name) + "' [" + std::to_string(r.begin) +
                ", " + std::to_string(r.end) + "] overlap in the data section");
    if (r.begin > at)
      throw bad("bytes [" + std::to_string(at) + ", " + std::to_string(r.begin) + ") of the data section " +
                "before tensor '" + brief(r.name) + "' belong to no tensor; expected contiguous tensors");
    at = r.end;
  }
  if (at != data_size)
    throw bad("the last " + std::to_string(data_size - at) + " bytes of the " + std::to_string(data_size) +
              "-byte data section belong to no tensor; expected contiguous tensors");
  if (const auto sum = st.metadata_.find(kChecksum); sum != st.metadata_.end()) {
    const std::string read = contents_checksum(std::span<const uint8_t>(bytes).subspan(st.data_start_), st.metadata_);
    if (read != sum->second)
      throw UserError(source + ": its tensors and metadata have CRC-32 " + read + ", not the " + brief(sum->second) +
                      " written with them in metadata '" + kChecksum +
                      "': the file was damaged after it was written (or changed with that key kept)");
  }
  st.file_ = std::move(bytes);
  return st;
}

namespace {

// The metadata entries but kChecksum's, as contents_checksum reads them.
std::string metadata_text(const std::map<std::string, std::string>& metadata) {
  std::string text;
  for (const auto& [key, value] : metadata)
    if (key != kChecksum)
      text += std::to_string(key.size()) + ":" + key + "=" + std::to_string(value.size()) + ":" + value + "\n";
  return text;
}

}  // namespace

std::string contents_checksum(std::span<const uint8_t> data, const std::map<std::string, std::string>& metadata) {
  return io::checksum(metadata_text(metadata), io::checksum(data));
}

std::string SafeTensorsWriter::checksum() const {
  std::string crc = io::checksum(std::span<const uint8_t>());
  for (auto& [name, e] : tensors_) crc = io::checksum(e.data, crc);  // in the data section's order
  return io::checksum(metadata_text(metadata_), crc);
}

std::vector<std::string> SafeTensors::names() const {
  std::vector<std::string> out;
  for (auto& [name, t] : tensors_) out.push_back(name);
  return out;
}

const TensorInfo& SafeTensors::info(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it == tensors_.end()) throw UserError(source_ + ": no tensor named '" + brief(name) + "'");
  return it->second;
}

std::span<const uint8_t> SafeTensors::bytes(const std::string& name) const {
  const TensorInfo& t = info(name);
  return {file_.data() + data_start_ + t.begin, t.end - t.begin};
}

std::vector<float> SafeTensors::f32(const std::string& name) const {
  const TensorInfo& t = info(name);
  if (t.dtype != DType::F32)
    throw UserError(source_ + ": tensor '" + brief(name) + "' is " + dtype_name(t.dtype) + ", expected F32");
  std::vector<float> out(t.elements());
  if (!out.empty()) std::memcpy(out.data(), bytes(name).data(), out.size() * 4);
  return out;
}

std::vector<float> SafeTensors::f32(const std::string& name, const std::vector<int64_t>& shape) const {
  const TensorInfo& t = info(name);
  if (t.shape != shape)
    throw UserError(source_ + ": tensor '" + brief(name) + "' has shape " + brief(shape_string(t.shape)) +
                    ", expected " + shape_string(shape));
  return f32(name);
}

std::vector<int32_t> SafeTensors::i32(const std::string& name, int64_t lo, int64_t hi) const {
  const TensorInfo& t = info(name);
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    throw UserError(source_ + ": tensor '" + brief(name) + "' is " + dtype_name(t.dtype) + ", expected I32 or I64");
  const auto raw = bytes(name);
  std::vector<int32_t> out(t.elements());
  for (size_t i = 0; i < out.size(); ++i) {
    int64_t v;
    if (t.dtype == DType::I32) {
      int32_t x;
      std::memcpy(&x, raw.data() + i * 4, 4);
      v = x;
    } else {
      std::memcpy(&v, raw.data() + i * 8, 8);
    }
    if (v < lo || v >= hi)
      throw UserError(source_ + ": tensor '" + brief(name) + "' element " + std::to_string(i) + " is " +
                      std::to_string(v) + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
    out[i] = int32_t(v);
  }
  return out;
}

void SafeTensorsWriter::add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data, size_t bytes) {
  uint64_t elements = 1;
  for (int64_t d : shape) elements *= uint64_t(d);
  if (elements * dtype_size(dtype) != bytes)
    throw InternalError("safetensors: " + name + " " + shape_string(shape) + " given " +
                        std::to_string(bytes) + " bytes");
  Entry e{dtype, shape, std::vector<uint8_t>(bytes)};
  if (bytes) std::memcpy(e.data.data(), data, bytes);
  tensors_[name] = std::move(e);
}

void SafeTensorsWriter::add(const std::string& name, const std::vector<int64_t>& shape, std::span<const float> data) {
  add(name, DType::F32, shape, data.data(), data.size_bytes());
}

void SafeTensorsWriter::add(const std::string& name, const std::vector<int64_t>& shape, std::span<const int32_t> data) {
  add(name, DType::I32, shape, data.data(), data.size_bytes());
}

std::vector<uint8_t> SafeTensorsWriter::serialize() const {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) header["__metadata__"] = metadata_;
  uint64_t offset = 0;
  for (auto& [name, e] : tensors_) {
    header[name] = {{"dtype", dtype_name(e.dtype)}, {"shape", e.shape}, {"data_offsets", {offset, offset + e.data.size()}}};
    offset += e.data.size();
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8) text += ' ';  // data starts 8-byte aligned
  std::vector<uint8_t> out(8);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out[size_t(i)] = uint8_t(n >> (8 * i));
  out.insert(out.end(), text.begin(), text.end());
  for (auto& [name, e] : tensors_) out.insert(out.end(), e.data.begin(), e.data.end());
  return out;
}

void SafeTensorsWriter::write(const std::string& path) const {
  const auto bytes = serialize();
  write_atomically(path, bytes);
}

namespace {

// The rename that ends write_atomically replaces whatever is at `path`: a device, a pipe or a
// link would become a regular file, a folder would fail only after the work. Refused, with
// an empty path, and a temporary that is not a regular file (which the write would open).
void check_replaceable(const std::string& path) {
  if (path.empty()) throw UserError("'': an empty path names no file to write");
  for (const std::string& p : {path, path + ".tmp"})
    if (const std::string what = not_regular(p, false); !what.empty())
      throw UserError(p + ": " + what + ", not a regular file; nothing is written over it" +
                      (what.rfind("is a symbolic link", 0) == 0 ? " (give the path of its target to write there)" : ""));
}

}  // namespace

void check_writable(const std::string& path) {
  check_replaceable(path);
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == EEXIST) return;  // a torn write's, which the write replaces
    const std::string why = std::strerror(errno);
    throw UserError(path + ": cannot create " + tmp + " (" + why + ")");
  }
  ::close(fd);
  ::unlink(tmp.c_str());
}

void write_atomically(const std::string& path, std::span<const uint8_t> bytes) {
  check_replaceable(path);
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& what) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw UserError(path + ": " + what + " failed (" + why + "); the previous file, if any, is untouched");
  };
  // Neither through a link nor blocked on a pipe put there since the check (O_NONBLOCK does
  // nothing to a regular file).
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (fd < 0) {
    const std::string why = std::strerror(errno);
    throw UserError(path + ": cannot create " + tmp + " (" + why + ")");
  }
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ::close(fd);
      fail("write");
    }
    done += size_t(w);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    fail("fsync");
  }
  if (::close(fd) != 0) fail("close");
  if (::rename(tmp.c_str(), path.c_str()) != 0) fail("rename");
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);  // makes the rename itself durable
    ::close(dfd);
  }
}

}  // namespace brigade::io
