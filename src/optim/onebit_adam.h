// 1-bit Adam (DeepSpeed's runtime/fp16/onebit/adam.py, arXiv:2102.02888); see compressed_optimizer.h.
//   step 1:                 set-up only (DeepSpeed allocates its buffers; nothing moves)
//   steps 2 .. freeze_step: m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2   (g all-reduced)
//   later:                  m = b1 m + (1-b1) g_local, then m = compressed average of m over ranks;
//                           v frozen
//   every step after 1:     p -= lr * (m / (sqrt(v) + eps) + wd p)
// Each parameter is compressed with its own scale (DeepSpeed calls compressed_allreduce per tensor);
// all of them share one exchange.
#pragma once

#include "comm/compressed_allreduce.h"
#include "optim/compressed_optimizer.h"

namespace ds::optim {

class OneBitAdam final : public CompressedOptimizer {
 public:
  OneBitAdam(int64_t freeze_step, comm::Communicator& comm, const std::vector<std::vector<ParamSpan>>& params);
  bool wants_reduced_gradients() const override { return !frozen_; }
  void step(std::span<const CompressedGroup> groups) override;
  nlohmann::json state_json() const override;
  void load_state_json(const nlohmann::json& j) override;
  std::string phase() const override { return frozen_ ? "compressed" : "warm-up"; }
  int64_t held_bytes() const override { return exchange_.held_bytes(); }

 private:
  const comm::CompressedAllReduce& exchange() const override { return exchange_; }
  comm::CompressedAllReduce& exchange() override { return exchange_; }
  int64_t freeze_step_;
  std::vector<std::vector<ParamSpan>> params_;
  comm::CompressedAllReduce exchange_;
  bool frozen_ = false;
};

}  // namespace ds::optim
