// ds::zero::GatheredParameters: an RAII guard that makes full parameters present for its scope —
// for a custom forward that is not a LayerList, or to read full weights (e.g. to save a 16-bit
// model) under stage 3. Every rank must create the same guards in the same order (they gather
// collectively). Read-only: writes into gathered parameters are not scattered back to the shards
// (or to the optimizer's fp32 master) and are lost at the next step. At stages 0-2 it does nothing.
//
//   { ds::zero::GatheredParameters all(engine);            // every trainable parameter
//     save(engine.model().named_parameters()); }
//   { ds::zero::GatheredParameters g(engine, {"head.weight"}); ... }
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace ds::zero {

class ModelStates;

class GatheredParameters {
 public:
  GatheredParameters(ModelStates& states, std::vector<std::string> names = {});
  // Any engine (ds::Engine exposes model_states()).
  template <class E>
    requires requires(E& e) { e.model_states(); }
  explicit GatheredParameters(E& engine, std::vector<std::string> names = {})
      : GatheredParameters(engine.model_states(), std::move(names)) {}
  ~GatheredParameters();
  GatheredParameters(const GatheredParameters&) = delete;
  GatheredParameters& operator=(const GatheredParameters&) = delete;

 private:
  ModelStates& states_;
  std::vector<std::string> names_;
};

}  // namespace ds::zero
