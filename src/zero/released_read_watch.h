// ReleasedReadWatch: on the first forward at stage 3, catches an operator that reads a released
// parameter. A released parameter's data is a NaN placeholder (sharded_params.h); a layer that reads a
// parameter it does not list in its LayerList param_names (or code outside the LayerList that reads a
// listed one) would otherwise train on NaN silently. A RecordFunction callback on the forward's thread
// compares every tensor input of every aten operator with the placeholders; the first hit is kept and
// reported after the forward, naming the parameter, the operator and the layer that ran it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "zero/sharded_params.h"

namespace ds::zero {

class ReleasedReadWatch {
 public:
  // `layer` names what runs now (the coordinator's current layer, or "outside the LayerList").
  ReleasedReadWatch(const ShardedParameters& params, std::function<std::string()> layer);
  ~ReleasedReadWatch();
  ReleasedReadWatch(const ReleasedReadWatch&) = delete;
  ReleasedReadWatch& operator=(const ReleasedReadWatch&) = delete;

  void start();
  // Stops watching; throws ds::NotSupported describing the first released read, if there was one.
  void stop_and_check();

  // Called by the operator callback.
  void on_operator(const char* op, const void* const* inputs, size_t count);

 private:
  const ShardedParameters& params_;
  std::function<std::string()> layer_;
  uint64_t handle_ = 0;
  bool running_ = false;
  std::optional<std::string> found_;
};

}  // namespace ds::zero
