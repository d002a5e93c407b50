#include "models/causal_lm.h"

#include <fmt/format.h>

#include "nn/fused_ops.h"
#include "util/error.h"

namespace ds::models {

void CausalLM::set_sequence_layout(std::optional<SequenceLayout> layout) {
  DS_CHECK(!layout || supports_sequence_layout(), NotSupported,
           model_type() + " models cannot take packed rows (positions and attention per document); "
                          "use padding (ds-train --pad) or a Llama-family / OPT model");
  DS_CHECK(!layout || !sequence_parallel(), NotSupported,
           "packed rows (per-document positions and attention) under sequence_parallel_size > 1 are not supported "
           "yet; use padded rows with Ulysses");
  *layout_slot_ = std::move(layout);
}

void CausalLM::enable_sequence_parallel(comm::Communicator& sp) {
  if (sp.size() == 1) return;
  if (!supports_sequence_parallel())
    throw ConfigError("sequence_parallel_size",
                      fmt::format("{} over {} ranks: {} models have no DistributedAttention-capable attention in "
                                  "deepspeed.cpp yet (GPT-2, the Llama family and OPT have); set sequence_parallel_size "
                                  "to 1",
                                  sp.size(), sp.size(), model_type()));
  DS_CHECK(!layout_slot_->has_value(), NotSupported,
           "sequence_parallel_size: the model holds a packed-rows layout; clear it (set_sequence_layout(nullopt)) first");
  const int64_t heads = local_attention_heads();
  if (heads % sp.size() != 0)
    throw ConfigError("sequence_parallel_size",
                      fmt::format("the attention's {} (key/value) heads per rank (after tensor parallelism's cut) "
                                  "do not split over a sequence-parallel group of {} (Ulysses gives each rank whole "
                                  "heads); use a size that divides {}",
                                  heads, sp.size(), heads));
  sp_slot_->comm = &sp;
}

parallel::VocabParallelModel::Cut CausalLM::enable_vocab_parallel(comm::Communicator& tp) {
  if (tp.size() == 1) return {};
  if (!supports_vocab_parallel())
    throw ConfigError("tensor_parallel.vocab_parallel",
                      fmt::format("{} models have no vocab-parallel embedding in deepspeed.cpp yet (GPT-2, whose LM "
                                  "head is tied to its embedding, has); set it to false",
                                  model_type()));
  DS_CHECK(!vp_slot_->active(), Error, "enable_vocab_parallel: the vocabulary is split already");
  const std::string name = vocab_embedding_parameter();
  auto params = named_parameters(/*recurse=*/true);
  torch::Tensor* table = params.find(name);
  DS_ASSERT(table != nullptr, model_type() + " names no parameter " + name);
  const int64_t rows = table->size(0);
  const parallel::VocabRange range = parallel::vocab_range(rows, tp.size(), tp.rank());
  {
    torch::NoGradGuard no_grad;
    table->set_data(table->narrow(0, range.begin, range.size()).clone());
  }
  vp_slot_->comm = &tp;
  vp_slot_->range = range;
  return {name, rows};
}

torch::Tensor CausalLM::token_loss(const torch::Tensor& logits, const torch::Tensor& targets) const {
  if (vocab_parallel()) {  // this rank's columns of the logits, for the tokens it holds
    const torch::Tensor mine = (sequence_parallel() ? parallel::shard_sequence(targets, *sp_slot_->comm) : targets).reshape({-1});
    const torch::Tensor sum = parallel::vocab_parallel_cross_entropy_sum(logits.reshape({-1, logits.size(-1)}), mine,
                                                                         vp_slot_->range, *vp_slot_->comm);
    const int64_t count = (mine != -100).sum().item<int64_t>();
    return sequence_parallel() ? parallel::sequence_parallel_mean(sum, count, *sp_slot_->comm) : sum / double(count);
  }
  if (!sequence_parallel()) return lm_loss(logits, targets);
  comm::Communicator& sp = *sp_slot_->comm;
  const torch::Tensor mine = parallel::shard_sequence(targets, sp).reshape({-1});  // aligned with the local logits
  const int64_t count = (mine != -100).sum().item<int64_t>();
  // The fused loss, as lm_loss (no fp32 log-softmax of the logits' size), as a sum over the counted
  // tokens; a block with none still joins the group's mean (a zero with the logits' graph).
  const torch::Tensor sum = count > 0 ? nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), mine) * double(count)
                                      : logits.sum().to(torch::kFloat) * 0.0;
  return parallel::sequence_parallel_mean(sum, count, sp);
}

torch::Tensor CausalLM::forward(const torch::Tensor& idx, const torch::Tensor& targets) {
  DS_CHECK(targets.defined() && idx.defined() && targets.sizes() == idx.sizes(), Error,
           model_type() + ": targets " + (targets.defined() ? shape_str(targets.sizes()) : std::string("undefined")) +
               " must have the shape of the inputs " + (idx.defined() ? shape_str(idx.sizes()) : std::string("undefined")));
  return token_loss(forward(idx), targets);
}

torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets) {
  // fp32 arithmetic over the logits in place, without a log-softmax of their size nor an fp32 copy
  // of 16-bit ones (nn/fused_ops.h); ignore_index -100.
  return nn::cross_entropy(logits.reshape({-1, logits.size(-1)}), targets.reshape({-1}));
}

torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels) {
  DS_CHECK(logits.dim() == 3 && labels.dim() == 2 && logits.size(0) == labels.size(0) &&
               logits.size(1) == labels.size(1),
           Error,
           "causal_lm_loss: logits " + shape_str(logits.sizes()) + " and labels " + shape_str(labels.sizes()) +
               " must be [B,T,V] and [B,T]");
  // Position t predicts label t + 1. The labels shift, not the logits: a slice of the [B, T, V]
  // logits costs a copy forward and a zero-filled gradient of their size backward. The last
  // position predicts nothing (-100), so the mean runs over the same B·(T-1) terms.
  const int64_t t = logits.size(1);
  torch::Tensor next = torch::full_like(labels, -100);
  if (t > 1) next.narrow(1, 0, t - 1).copy_(labels.narrow(1, 1, t - 1));
  return lm_loss(logits, next);
}

std::vector<std::string> prefixed_param_names(torch::nn::Module& m, const std::string& prefix) {
  std::vector<std::string> names;
  for (const auto& item : m.named_parameters(/*recurse=*/true)) names.push_back(prefix + item.key());
  return names;
}

void check_token_ids(const torch::Tensor& idx, int64_t vocab_size, int64_t max_positions, const std::string& who) {
  DS_CHECK(idx.defined() && idx.dim() == 2, Error,
           who + ": expected token ids of shape [batch, seq], got " +
               (idx.defined() ? shape_str(idx.sizes()) : std::string("an undefined tensor")));
  DS_CHECK(idx.scalar_type() == torch::kLong, Error,
           who + ": token ids must be int64, got " + c10::toString(idx.scalar_type()));
  const int64_t t = idx.size(1);
  DS_CHECK(t >= 1, Error, who + ": empty sequence (seq length 0)");
  DS_CHECK(max_positions <= 0 || t <= max_positions, Error,
           who + ": sequence length " + std::to_string(t) + " exceeds max_position_embeddings " +
               std::to_string(max_positions) + " (use a shorter seq_len)");
  if (idx.device().is_cpu() && idx.numel() > 0) {
    const int64_t lo = idx.min().item<int64_t>();
    const int64_t hi = idx.max().item<int64_t>();
    DS_CHECK(lo >= 0 && hi < vocab_size, Error,
             who + ": token id " + std::to_string(lo < 0 ? lo : hi) + " outside [0, vocab_size = " +
                 std::to_string(vocab_size) + ")");
  }
}

std::string shape_str(torch::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t d = 0; d < sizes.size(); ++d) s += (d ? "," : "") + std::to_string(sizes[d]);
  return s + "]";
}

}  // namespace ds::models
