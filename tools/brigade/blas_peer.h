// OpenBLAS as the peer `brigade bench kernels` measures the matmul kernel against: the same
// products through cblas_sgemm on the host's cores, in the same run. OpenBLAS is an optional
// comparison dependency (Debian's libopenblas0-pthread, `tools/install-deps.sh --reference`),
// opened at run time; without it the comparison says so and the benchmark still runs.
#pragma once

#include <cstdint>
#include <string>

namespace brigade::cli {

class BlasPeer {
 public:
  BlasPeer();  // looks for OpenBLAS; never throws
  bool found() const { return sgemm_ != nullptr; }
  // "OpenBLAS 0.3.21 ... (libopenblas.so.0), 2 threads", or why there is none.
  const std::string& description() const { return description_; }
  // Median wall-clock milliseconds of C (M,N) = op(A) op(B) over `reps` calls after one
  // warm-up, row-major, op(A) (M,K) stored transposed when trans_a, op(B) (K,N) likewise.
  double median_ms(uint64_t M, uint64_t N, uint64_t K, bool trans_a, bool trans_b, int reps) const;

 private:
  using Sgemm = void (*)(int, int, int, int, int, int, float, const float*, int, const float*, int,
                         float, float*, int);
  Sgemm sgemm_ = nullptr;
  std::string description_;
};

}  // namespace brigade::cli
