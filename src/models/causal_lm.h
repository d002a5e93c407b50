// ds::models::CausalLM: what every built-in language model family is (GPT-2, the Llama family, OPT):
// a torch::nn::Module whose forward is its LayerList, with Hugging Face parameter names and an HF
// config.json of its own. from_pretrained returns one, ds::initialize accepts one
// (std::shared_ptr<CausalLM>), ZeRO-3 and activation checkpointing walk its layers().
#pragma once

#include <torch/torch.h>

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "models/sequence_layout.h"
#include "nn/layer_list.h"
#include "nn/placeholder.h"
#include "parallel/ulysses.h"
#include "parallel/vocab_parallel.h"

namespace ds::models {

class CausalLM : public torch::nn::Module, public parallel::SequenceParallelModel, public parallel::VocabParallelModel {
 public:
  // Token ids int64 [B,T] → logits [B,T,V] in the parameters' dtype. Runs layers().forward(idx).
  virtual torch::Tensor forward(const torch::Tensor& idx) = 0;
  // Mean cross-entropy of forward(idx) against `targets` int64 [B,T] ALIGNED with the inputs
  // (targets[b,t] is the token after idx[b,t], as BatchSampler makes them); -100 is ignored.
  // For Hugging Face's convention (labels = input ids, shifted inside) use causal_lm_loss.
  virtual torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets);

  // "embed", one layer per transformer block, "head" (see each family's header for the names).
  virtual const ds::nn::LayerList& layers() const = 0;
  virtual ds::nn::LayerList& layers() = 0;

  // Hugging Face's model_type: "gpt2", "llama", "mistral", "qwen2", "opt".
  virtual std::string model_type() const = 0;
  // The config.json Hugging Face's AutoModelForCausalLM builds this model from.
  virtual nlohmann::json hf_config() const = 0;
  // How a parameter is stored in an HF checkpoint: its name there (identity for every family
  // here) and whether the stored tensor is the transpose of ours (GPT-2's Conv1D weights).
  virtual bool hf_transposed(const std::string& name) const { return false; }
  // Names an HF checkpoint may carry that this model does not need (tied lm_head.weight,
  // GPT-2's attention-mask buffers): ignored by the loader without a warning.
  virtual bool hf_ignorable(const std::string& name) const {
    return name == "lm_head.weight" || name.ends_with(".rotary_emb.inv_freq");
  }
  // The prefix HF's base model (GPT2Model, LlamaModel, OPTModel) leaves out of its checkpoints'
  // names ("model." here; "transformer." for GPT-2): files saved from a base model load too.
  virtual std::string hf_base_prefix() const { return "model."; }
  // One line: family, shape, parameter count.
  virtual std::string describe() const = 0;

  // Packed rows: the following forwards (and their backward, recomputation included) use `layout`
  // (positions per document, attention within a document); std::nullopt returns to plain causal
  // rows. ds::NotSupported for a family that cannot take one (supports_sequence_layout()).
  void set_sequence_layout(std::optional<SequenceLayout> layout);
  virtual bool supports_sequence_layout() const { return false; }

  // Ulysses (parallel/ulysses.h): every rank of `sp` is given the whole batch; the embedding keeps
  // this rank's tokens (global positions), attention all-to-alls over the group, forward(idx) returns
  // this rank's [B,T/N,V] logits and forward(idx, targets) the group's mean over every token.
  // ConfigError naming sequence_parallel_size for a family without it or heads that do not split.
  void enable_sequence_parallel(comm::Communicator& sp) override;
  virtual bool supports_sequence_parallel() const { return false; }
  bool sequence_parallel() const { return sp_slot_->active(); }

  // The vocab-parallel embedding and tied head (parallel/vocab_parallel.h): this rank keeps its rows
  // of the token embedding, forward(idx) returns its columns of the logits [B,T,V_rank] and
  // forward(idx, targets) the cross-entropy over the whole vocabulary (parallel, the same on every
  // rank). ConfigError naming tensor_parallel.vocab_parallel for a family without a tied head.
  Cut enable_vocab_parallel(comm::Communicator& tp) override;
  virtual bool supports_vocab_parallel() const { return false; }
  bool vocab_parallel() const { return vp_slot_->active(); }

  // The loss forward(idx, targets) takes of forward(idx)'s logits: lm_loss, or under Ulysses the
  // group's token mean (what a pipeline's last stage computes: PipelineModuleOptions::loss_fn).
  torch::Tensor loss(const torch::Tensor& logits, const torch::Tensor& targets) const { return token_loss(logits, targets); }

 protected:
  // The attention heads each rank computes before Ulysses splits them (after AutoTP's cut), read from
  // the first block whose weights this rank holds (a pipeline stage released the others').
  virtual int64_t local_attention_heads() const { return 0; }
  // The token embedding's parameter name, which the vocab-parallel cut splits by rows (a family that
  // supports_vocab_parallel() names it; its head must read that parameter through vp_slot_).
  virtual std::string vocab_embedding_parameter() const { return ""; }
  // lm_loss, or under sequence parallelism the group's token mean over this rank's targets' block.
  torch::Tensor token_loss(const torch::Tensor& logits, const torch::Tensor& targets) const;

  SequenceLayoutSlot layout_slot_ = std::make_shared<std::optional<SequenceLayout>>();
  parallel::SequenceGroupSlot sp_slot_ = std::make_shared<parallel::SequenceGroup>();
  parallel::VocabGroupSlot vp_slot_ = std::make_shared<parallel::VocabGroup>();
};

// Mean cross-entropy of logits [B,T,V] against aligned targets [B,T] (-100 ignored); 16-bit
// logits are upcast to fp32.
torch::Tensor lm_loss(const torch::Tensor& logits, const torch::Tensor& targets);

// Hugging Face's causal-LM loss: logits [B,T,V], labels [B,T] = the input ids (entries -100 are
// ignored); position t predicts labels[t+1], so the last position and the first label drop out.
// Equal to lm_loss(logits[:, :-1], labels[:, 1:]). Mean over the labels that are not -100.
torch::Tensor causal_lm_loss(const torch::Tensor& logits, const torch::Tensor& labels);

// Every parameter name of `m`, prefixed ("model.layers.3." + "self_attn.q_proj.weight"): a Layer's
// param_names for a block that is one submodule.
std::vector<std::string> prefixed_param_names(torch::nn::Module& m, const std::string& prefix);

// Token ids must be int64 [B,T] with T ≥ 1, T ≤ max_positions when given (> 0), and (checked on
// CPU, where it is cheap) every id in [0, vocab_size): ds::Error naming `who` and the numbers.
void check_token_ids(const torch::Tensor& idx, int64_t vocab_size, int64_t max_positions, const std::string& who);

// "[2,3,4]" for messages.
std::string shape_str(torch::IntArrayRef sizes);

}  // namespace ds::models
