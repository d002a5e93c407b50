// ReleasedReadWatch (see released_read_watch.h). The callbacks are plain function pointers, so they
// find the watch through a thread_local pointer, set by start() and cleared by stop_and_check().
#include "zero/released_read_watch.h"

#include <ATen/record_function.h>
#include <fmt/format.h>

#include <string_view>
#include <vector>

#include "util/error.h"

namespace ds::zero {
namespace {

thread_local ReleasedReadWatch* tls_watch = nullptr;

// Operators that only look at metadata or make views: a gather's own set_data checks the placeholder
// with the first, and a view of a placeholder is caught where it is computed with.
bool reads_no_data(std::string_view op) {
  static constexpr std::string_view kMetadata[] = {
      "aten::_has_compatible_shallow_copy_type", "aten::detach", "aten::alias", "aten::view", "aten::expand",
      "aten::t", "aten::transpose", "aten::permute", "aten::reshape", "aten::as_strided", "aten::_reshape_alias"};
  for (auto m : kMetadata)
    if (op == m) return true;
  return false;
}

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  ReleasedReadWatch* w = tls_watch;
  if (w == nullptr || reads_no_data(fn.name())) return nullptr;
  std::vector<const void*> data;
  for (const c10::IValue& v : fn.inputs()) {
    if (v.isTensor()) {
      const auto& t = v.toTensor();
      if (t.defined() && t.has_storage()) data.push_back(t.storage().data());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorVector())
        if (t.defined() && t.has_storage()) data.push_back(t.storage().data());
    }
  }
  if (!data.empty()) w->on_operator(fn.name(), data.data(), data.size());
  return nullptr;
}

}  // namespace

ReleasedReadWatch::ReleasedReadWatch(const ShardedParameters& params, std::function<std::string()> layer)
    : params_(params), layer_(std::move(layer)) {}

ReleasedReadWatch::~ReleasedReadWatch() {
  if (!running_) return;
  at::removeCallback(handle_);
  if (tls_watch == this) tls_watch = nullptr;
}

void ReleasedReadWatch::start() {
  if (running_ || tls_watch != nullptr) return;
  found_.reset();
  tls_watch = this;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&on_start).needsInputs(true).scopes({at::RecordScope::FUNCTION}));
  running_ = true;
}

void ReleasedReadWatch::on_operator(const char* op, const void* const* inputs, size_t count) {
  if (found_) return;
  for (size_t i = 0; i < count; ++i) {
    auto id = params_.released_at(inputs[i]);
    if (!id) continue;
    found_ = fmt::format("parameter '{}' was read by {} in layer {} while released (its data there is a NaN "
                         "placeholder, so the step would train on NaN)",
                         params_[*id].name, op, layer_());
    return;
  }
}

void ReleasedReadWatch::stop_and_check() {
  if (!running_) return;
  at::removeCallback(handle_);
  handle_ = 0;
  running_ = false;
  if (tls_watch == this) tls_watch = nullptr;
  if (!found_) return;
  throw NotSupported(
      "zero_optimization.stage 3: " + *found_ +
      ". Stage 3 gathers a parameter only around the layers whose LayerList param_names list it: list it in "
      "every layer that reads it (a tied parameter is listed in each), or read it inside a "
      "ds::zero::GatheredParameters scope (docs/zero.md)");
}

}  // namespace ds::zero
