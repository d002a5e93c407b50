#include "inference/tensor_parallel.h"

#include <algorithm>
#include <array>
#include <string>

#include "comm/watchdog.h"
#include "parallel/auto_tp.h"
#include "util/error.h"

namespace ds::inference {
namespace {

enum Command : int64_t { kForward = 1, kKeepAlive = 2, kReturn = 3 };

}  // namespace

void shard_for_inference(models::CausalLM& model, comm::Communicator& tp) {
  try {
    parallel::apply_auto_tp(model, tp);
  } catch (const ConfigError& e) {
    throw ConfigError("tensor_parallel", "inference at tensor-parallel size " + std::to_string(tp.size()) + ": " +
                                             e.what());
  }
}

TpLeader::TpLeader(std::unique_ptr<RaggedModel> inner, comm::Communicator& tp)
    : RaggedModel(inner->model_ptr()), inner_(std::move(inner)), tp_(tp),
      last_sent_(std::chrono::steady_clock::now()) {
  const double timeout_s = comm::comm_timeout_from_env();
  keep_alive_interval_ = std::chrono::duration<double>(timeout_s > 0 ? std::min(5.0, timeout_s / 4) : 5.0);
  DS_CHECK(tp.rank() == 0, Error, "TpLeader: rank 0 of the tensor-parallel group leads, not rank " +
                                      std::to_string(tp.rank()));
}

void TpLeader::send(int64_t command, const std::vector<int64_t>& payload) {
  std::array<int64_t, 2> header{command, static_cast<int64_t>(payload.size())};
  tp_.broadcast(comm::Buffer(header.data(), header.size()), 0, "tp_inference.command");
  if (!payload.empty())
    tp_.broadcast(comm::Buffer(const_cast<int64_t*>(payload.data()), payload.size()), 0, "tp_inference.batch");
  last_sent_ = std::chrono::steady_clock::now();
}

torch::Tensor TpLeader::forward(const RaggedBatch& batch, KvCache& cache) {
  send(kForward, batch.wire());
  return inner_->forward(batch, cache);
}

void TpLeader::release() { send(kReturn, {}); }

void TpLeader::keep_alive() {
  if (std::chrono::steady_clock::now() - last_sent_ >= keep_alive_interval_) send(kKeepAlive, {});
}

int64_t follow_tp_leader(RaggedModel& model, KvCache& cache, comm::Communicator& tp) {
  DS_CHECK(tp.rank() != 0, Error, "follow_tp_leader: rank 0 of the tensor-parallel group leads; it does not follow");
  model.set_compute_logits(false);
  int64_t forwards = 0;
  std::vector<int64_t> wire;
  for (;;) {
    std::array<int64_t, 2> header{};
    tp.broadcast(comm::Buffer(header.data(), header.size()), 0, "tp_inference.command");
    switch (header[0]) {
      case kForward:
        wire.resize(static_cast<size_t>(header[1]));
        tp.broadcast(comm::Buffer(wire.data(), wire.size()), 0, "tp_inference.batch");
        model.forward(RaggedBatch::from_wire(wire, model.device()), cache);
        ++forwards;
        break;
      case kKeepAlive:
        break;
      case kReturn:
        return forwards;
      default:
        throw Error("tensor-parallel inference: unknown command " + std::to_string(header[0]) +
                    " from the leader (the ranks run different builds?)");
    }
  }
}

}  // namespace ds::inference
