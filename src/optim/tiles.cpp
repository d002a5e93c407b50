// The optimizer kernels' thread split (see tiles.h).
#include "optim/tiles.h"

#include <omp.h>

#include <algorithm>

namespace ds::optim {

void for_each_tile(std::int64_t n, int threads, const std::function<void(std::int64_t, std::int64_t)>& fn) {
  if (n <= 0) return;
  const std::int64_t want = threads > 0 ? threads : omp_get_max_threads();
  const std::int64_t useful = std::max<std::int64_t>(1, n / kMinTileElems);
  const int team = static_cast<int>(std::min(want, useful));
  if (team <= 1) {
    fn(0, n);
    return;
  }
#pragma omp parallel num_threads(team)
  {
    // The runtime may give fewer threads than asked: size tiles by the team actually running.
    const std::int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const std::int64_t per = ((n + nt - 1) / nt + kTileAlign - 1) / kTileAlign * kTileAlign;
    const std::int64_t begin = std::min(n, t * per), end = std::min(n, begin + per);
    if (begin < end) fn(begin, end);
  }
}

}  // namespace ds::optim
