// 1-bit LAMB (DeepSpeed's runtime/fp16/onebit/lamb.py, arXiv:2104.06069); see compressed_optimizer.h.
//   step 1: set-up only.
//   steps 2 .. freeze_step (all-reduced gradients): Lamb without bias correction, per parameter
//     u = m / (sqrt(v) + eps) + wd p;  coeff = clamp(||p|| / ||u||, min_coeff, max_coeff) (1 when a
//     norm is 0); p -= lr coeff u; the coefficients' EMA (coeff_beta) is the frozen coefficient.
//   later: each parameter's momentum is scaled to a common magnitude (the mean of the per-parameter
//     RMS over the parameter's own, computed once), the whole momentum is exchanged compressed as ONE
//     tensor, and the frozen coefficient is multiplied by a factor: how much smaller the fresh variance
//     (tracked from the gradients reconstructed out of successive momenta) makes the denominator,
//     bounded to [factor_min, factor_max] and to +-factor_threshold of the last factor.
// Unlike DeepSpeed: a parameter marked ParamSpan::apart (a tied parameter whose copies live on other
// pipeline stages) is exchanged as a tensor of its own, with its own compression scale and
// scaling_coeff 1, so its update depends on its own momentum only and every copy gets the same one.
// DeepSpeed compresses it inside the stage's one tensor, and the copies drift apart.
#pragma once

#include "comm/compressed_allreduce.h"
#include "optim/compressed_optimizer.h"

namespace ds::optim {

struct OneBitLambSettings {
  int64_t freeze_step = 100000;
  double max_coeff = 10.0, min_coeff = 0.01;
  double coeff_beta = 0.9;
  double factor_max = 4.0, factor_min = 0.5, factor_threshold = 0.1;
};

class OneBitLamb final : public CompressedOptimizer {
 public:
  OneBitLamb(const OneBitLambSettings& settings, comm::Communicator& comm,
             const std::vector<std::vector<ParamSpan>>& params);
  bool wants_reduced_gradients() const override { return !frozen_; }
  void step(std::span<const CompressedGroup> groups) override;
  nlohmann::json state_json() const override;
  void load_state_json(const nlohmann::json& j) override;
  std::string phase() const override { return frozen_ ? "compressed" : "warm-up"; }
  int64_t held_bytes() const override;
  // The last step's coefficient per parameter (DeepSpeed's get_lamb_coeffs()).
  const std::vector<double>& lamb_coeffs() const { return last_coeffs_; }

 private:
  const comm::CompressedAllReduce& exchange() const override { return exchange_; }
  comm::CompressedAllReduce& exchange() override { return exchange_; }
  struct Scalars {  // per parameter, DeepSpeed's state entries of the same names
    double lamb_coeff_freeze = 0.0;
    double last_factor = 1.0;
    double scaling_coeff = 1.0;
  };
  void warm_up_step(std::span<const CompressedGroup> groups);
  void compressed_step(std::span<const CompressedGroup> groups);
  OneBitLambSettings settings_;
  std::vector<std::vector<ParamSpan>> params_;
  std::vector<std::vector<Scalars>> scalars_;  // [group][param]
  int64_t total_numel_ = 0;
  int64_t joined_numel_ = 0;                   // the parameters not kept apart
  comm::CompressedAllReduce exchange_;         // their momenta concatenated, then each apart one
  std::vector<float> flat_;                    // that concatenation, when it is not one span already
  std::vector<float> last_momentum_;           // per step: the momentum before this step
  std::vector<double> last_coeffs_;
  bool frozen_ = false;
  bool scaled_ = false;                        // scaling_coeff computed
};

}  // namespace ds::optim
