// Tensor-parallel inference (DeepSpeed-MII's tensor_parallel): the model's projections are cut by
// AutoTP (parallel/auto_tp.h, the training policy: whole attention heads and MLP columns per rank)
// and every rank of the group runs every forward for its share; the row-parallel layers all-reduce.
//
// Rank 0 of the group is the leader: it alone schedules, owns the block tables and samples. Before
// each forward it sends the followers the batch's compact form (RaggedBatch::wire: tokens, starts,
// block tables), so each follower's KV cache — the same blocks, its heads only — receives the same
// writes. The followers skip the [S,V] head. Commands travel as broadcasts over the group:
//   Forward (then the wire), KeepAlive (an idle leader is alive: followers wait inside a watched
//   collective, and the communicator's watchdog would otherwise end an idle server), Return (the
//   followers' follow_tp_leader returns: a Pipeline::generate or the server is done). Each call of
//   follow_tp_leader on the followers is ended by exactly one release() on the leader.
#pragma once

#include <chrono>
#include <memory>

#include "comm/communicator.h"
#include "inference/kv_cache.h"
#include "inference/ragged_model.h"
#include "models/causal_lm.h"

namespace ds::inference {

// Collective over `tp`: cuts `model`'s projections into this rank's share (parameters broadcast
// from the group's rank 0 first, so every rank serves rank 0's weights). ds::ConfigError naming
// tensor_parallel when the heads (kv heads for GQA) or an MLP width do not divide by tp.size().
void shard_for_inference(models::CausalLM& model, comm::Communicator& tp);

// The leader's model: sends each forward to the followers, then runs its own share.
class TpLeader final : public RaggedModel {
 public:
  TpLeader(std::unique_ptr<RaggedModel> inner, comm::Communicator& tp);

  KvCacheShape cache_shape() const override { return inner_->cache_shape(); }
  int64_t vocab_size() const override { return inner_->vocab_size(); }
  int64_t max_positions() const override { return inner_->max_positions(); }
  torch::Tensor forward(const RaggedBatch& batch, KvCache& cache) override;

  // The followers return from follow_tp_leader.
  void release();
  // A KeepAlive when nothing was sent for a quarter of the watchdog's timeout (DS_COMM_TIMEOUT_S;
  // at most 5 s), so an idle leader's followers never wait long enough to be called hung.
  void keep_alive();

 private:
  void send(int64_t command, const std::vector<int64_t>& payload);

  std::unique_ptr<RaggedModel> inner_;
  comm::Communicator& tp_;
  std::chrono::steady_clock::time_point last_sent_;
  std::chrono::duration<double> keep_alive_interval_;
};

// On every rank of `tp` but 0: runs the leader's forwards over `model` (logits off) and `cache`
// until the leader releases the followers. Returns the number of forwards run.
int64_t follow_tp_leader(RaggedModel& model, KvCache& cache, comm::Communicator& tp);

}  // namespace ds::inference
