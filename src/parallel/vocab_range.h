// How a vocabulary's rows split over a tensor-parallel group (the vocab-parallel embedding,
// parallel/vocab_parallel.h): whole rows, uneven when they do not divide — GPT-2's 50257 over 2 ranks
// is 25129 + 25128 — so checkpoints and vocabularies need no padding. No LibTorch: estimates use it.
#pragma once

#include <cstdint>

namespace ds::parallel {

// Rows [begin, end) of a `vocab`-row table that rank `rank` of `world` holds: the first
// vocab % world ranks hold one row more. ConfigError naming tensor_parallel.vocab_parallel when the
// table has fewer rows than ranks.
struct VocabRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const noexcept { return end - begin; }
};
VocabRange vocab_range(int64_t vocab, int world, int rank);

}  // namespace ds::parallel
