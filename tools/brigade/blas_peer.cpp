#include "blas_peer.h"

#include <dlfcn.h>

#include <chrono>
#include <vector>

#include "util/stats.h"

namespace brigade::cli {
namespace {

// CBLAS's enum values (cblas.h), which every CBLAS shares.
constexpr int kRowMajor = 101, kNoTrans = 111, kTrans = 112;

}  // namespace

BlasPeer::BlasPeer() {
  void* lib = nullptr;
  const char* name = nullptr;
  for (const char* candidate : {"libopenblas.so.0", "libopenblas.so"})
    if ((lib = dlopen(candidate, RTLD_NOW | RTLD_LOCAL))) {
      name = candidate;
      break;
    }
  if (!lib) {
    description_ = "OpenBLAS not found (libopenblas.so.0: tools/install-deps.sh --reference)";
    return;
  }
  sgemm_ = reinterpret_cast<Sgemm>(dlsym(lib, "cblas_sgemm"));
  if (!sgemm_) {
    description_ = std::string(name) + " has no cblas_sgemm";
    return;
  }
  auto config = reinterpret_cast<const char* (*)()>(dlsym(lib, "openblas_get_config"));
  auto threads = reinterpret_cast<int (*)()>(dlsym(lib, "openblas_get_num_threads"));
  description_ = std::string(config ? config() : "OpenBLAS") + " (" + name + ")";
  if (threads) description_ += ", " + std::to_string(threads()) + " threads";
}

double BlasPeer::median_ms(uint64_t M, uint64_t N, uint64_t K, bool trans_a, bool trans_b,
                           int reps) const {
  std::vector<float> a(M * K, 0.5f), b(K * N, 0.25f), c(M * N);
  const int lda = int(trans_a ? M : K), ldb = int(trans_b ? K : N);
  auto call = [&] {
    sgemm_(kRowMajor, trans_a ? kTrans : kNoTrans, trans_b ? kTrans : kNoTrans, int(M), int(N),
           int(K), 1.0f, a.data(), lda, b.data(), ldb, 0.0f, c.data(), int(N));
  };
  call();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return median(ms);
}

}  // namespace brigade::cli
