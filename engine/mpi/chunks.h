// MPI counts are ints: a message of more than INT_MAX bytes (a resumed checkpoint with
// optimizer state, a large stage's gradients) goes as several. The chunk size is a setting
// so tests can cross chunk boundaries with small buffers.
#pragma once

#include <cstddef>
#include <cstdint>

namespace brigade::mpi {

// Bytes per MPI call at most (default 1 GiB); at least 1.
uint64_t chunk_bytes();
void set_chunk_bytes(uint64_t bytes);
// Elements of `element_size` bytes per MPI call (at least 1).
size_t chunk_elements(size_t element_size);

}  // namespace brigade::mpi
