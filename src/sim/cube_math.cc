// The Cube's arithmetic: one K fractal at a time into the f32 accumulator (sim.h).
#include <cblas.h>

#include <algorithm>

#include "tilepipe/sim.h"

namespace tilepipe::sim {

void cube_matmul(int64_t m, int64_t n, int64_t k, int64_t k_fractal, const float* a, const float* b,
                 float* c, bool accumulate) {
  // Single-threaded: the simulator runs cores on its own threads, and a fixed thread count
  // keeps the summation order, so the result, the same from run to run.
  static const bool one_thread = (openblas_set_num_threads(1), true);
  (void)one_thread;
  const int M = static_cast<int>(m), N = static_cast<int>(n), K = static_cast<int>(k);
  if (K == 0 && !accumulate) std::fill(c, c + m * n, 0.0f);
  // sgemm over one fractal of K computes each element's chain of FMAs in K order from 0 and
  // adds it to C once (beta 1): the Cube's step, as fast as one sgemm over the whole of K
  // (tests/sim_test.cc checks it against the chain written out).
  for (int kb = 0; kb < K; kb += static_cast<int>(k_fractal)) {
    const int kf = std::min(static_cast<int>(k_fractal), K - kb);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, N, kf, 1.0f, a + kb, K,
                b + static_cast<int64_t>(kb) * N, N, accumulate || kb > 0 ? 1.0f : 0.0f, c, N);
  }
}

}  // namespace tilepipe::sim
