// The loss scaler's state in the checkpoint manifest's "engine" JSON.
#include <nlohmann/json.hpp>

#include "precision/loss_scaler.h"

namespace ds::precision {

nlohmann::json LossScaler::state_json() const {
  const LossScalerState& s = st_;
  return {{"kind", int(s.kind)}, {"cur_scale", s.cur_scale}, {"cur_iter", s.cur_iter},
          {"last_overflow_iter", s.last_overflow_iter}, {"scale_factor", s.scale_factor},
          {"scale_window", s.scale_window}, {"min_scale", s.min_scale}, {"delayed_shift", s.delayed_shift},
          {"cur_hysteresis", s.cur_hysteresis}, {"consecutive_hysteresis", s.consecutive_hysteresis},
          {"raise_error_at_min_scale", s.raise_error_at_min_scale}};
}

bool LossScaler::load_state_json(const nlohmann::json& j) {
  LossScalerState s;
  s.kind = static_cast<ScalerKind>(j.at("kind").get<int>());
  if (s.kind != st_.kind) return false;
  s.cur_scale = j.at("cur_scale");
  s.cur_iter = j.at("cur_iter");
  s.last_overflow_iter = j.at("last_overflow_iter");
  s.scale_factor = j.at("scale_factor");
  s.scale_window = j.at("scale_window");
  s.min_scale = j.at("min_scale");
  s.delayed_shift = j.at("delayed_shift");
  s.cur_hysteresis = j.at("cur_hysteresis");
  s.consecutive_hysteresis = j.at("consecutive_hysteresis");
  s.raise_error_at_min_scale = j.at("raise_error_at_min_scale");
  load_state(s);
  return true;
}

}  // namespace ds::precision
