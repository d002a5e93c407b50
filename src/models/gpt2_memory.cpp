// GPT-2 activation estimate (see gpt2_memory.h).
#include "models/gpt2_memory.h"

#include <algorithm>
#include <cmath>

namespace ds::models {
namespace {

// Fitted to the peak RSS of ds-train (fp32, one rank) per extra sample, on a token-dominated shape
// (4 layers, embd 256, 4 heads, seq 256: 34.3 MB estimated, 34.5 measured) and an attention-dominated
// one (2 layers, embd 64, 8 heads, seq 512: 41.4 MB estimated, 39.8 measured). Per token, 24
// [embd] vectors: the 20 a block saves for backward (its input, both layer-norm outputs, qkv (3),
// the contiguous q, k, v copies the batched matmuls make (3), the attention output, the residual
// sum, the MLP's 4x-wide input and GELU output (4 + 4), ...) and the gradients alive in backward.
constexpr double kPerToken = 24;
// Per [seq, seq] score matrix of each head: the softmax output backward needs, and one transient.
constexpr double kPerScore = 2;
// The logits, their log-softmax, and the gradient of the logits, all fp32.
constexpr double kLogitCopies = 3;

}  // namespace

ActivationEstimate estimate_activations(const GPT2Config& s, int64_t micro, int64_t seq, int bytes_per_element,
                                        std::optional<int64_t> checkpoint_segments) {
  // Doubles throughout: a micro-batch of INT64_MAX must give a huge number, not wrap around.
  const double b = double(micro), t = double(seq), c = double(s.n_embd), h = double(s.n_head);
  const double bytes = double(bytes_per_element), layers = double(s.n_layer);
  ActivationEstimate e;
  e.per_layer = b * t * c * (kPerToken + kPerScore * h * t / c) * bytes;
  if (checkpoint_segments) {
    const double segments = std::clamp(double(*checkpoint_segments), 1.0, layers);
    const double segment_inputs = segments * b * t * c * bytes;
    e.layers = segment_inputs + std::ceil(layers / segments) * e.per_layer;  // one segment recomputed at a time
  } else {
    e.layers = layers * e.per_layer;
  }
  e.logits = b * t * double(s.vocab_size) * 4.0 * kLogitCopies;
  return e;
}

}  // namespace ds::models
