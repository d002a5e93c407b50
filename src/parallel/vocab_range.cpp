#include "parallel/vocab_range.h"

#include <algorithm>
#include <string>

#include "util/error.h"

namespace ds::parallel {

VocabRange vocab_range(int64_t vocab, int world, int rank) {
  if (!(world >= 1 && rank >= 0 && rank < world && vocab >= world))
    throw ConfigError("tensor_parallel.vocab_parallel", "a vocabulary of " + std::to_string(vocab) +
                                                            " rows does not split over " + std::to_string(world) +
                                                            " tensor-parallel ranks");
  const int64_t base = vocab / world, extra = vocab % world;
  const int64_t begin = rank * base + std::min<int64_t>(rank, extra);
  return {begin, begin + base + (rank < extra ? 1 : 0)};
}

}  // namespace ds::parallel
