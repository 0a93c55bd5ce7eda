#include "mpi/chunks.h"

#include <algorithm>
#include <atomic>

namespace brigade::mpi {

namespace {
std::atomic<uint64_t> g_chunk_bytes{uint64_t(1) << 30};
}

uint64_t chunk_bytes() { return g_chunk_bytes.load(); }
void set_chunk_bytes(uint64_t bytes) { g_chunk_bytes.store(std::max<uint64_t>(bytes, 1)); }
size_t chunk_elements(size_t element_size) { return std::max<size_t>(1, chunk_bytes() / element_size); }

}  // namespace brigade::mpi
