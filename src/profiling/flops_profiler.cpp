// FlopsProfiler: the RecordFunction callbacks and the per-operator bookkeeping.
//
// LibTorch 1.13 (ATen/record_function.h): at::addThreadLocalCallback(at::RecordFunctionCallback(
// start, end).needsInputs(true).needsOutputs(true).scopes({...})) returns a handle for
// at::removeCallback. The callbacks are plain function pointers, so they find the running
// profiler through a thread_local pointer: that pointer is the one piece of state outside the
// object, set by start() and cleared by stop() on the same thread (hence one running profiler
// per thread).
#include "profiling/flops_profiler.h"

#include <ATen/record_function.h>

#include <chrono>

#include "profiling/op_flops.h"
#include "util/error.h"

namespace ds::profiling {
namespace {

thread_local FlopsProfiler* tls_active = nullptr;

using Clock = std::chrono::steady_clock;

}  // namespace

// What the start callback hands to the end callback for one outermost operator.
struct FlopsProfiler::OpFrame : at::ObserverContext {
  int module = 0;
  OpCost cost;
  bool convolution = false;
  std::vector<int64_t> conv_input, conv_weight;  // shapes, kept for the end (output) half
  bool conv_bias = false;
  bool conv_transposed = false;
  Clock::time_point start;
};

struct ProfilerCallbacks {
  // Runs for every RecordFunction (aten operator, autograd node) on the profiling thread.
  static std::unique_ptr<at::ObserverContext> start(const at::RecordFunction& fn) {
    FlopsProfiler* p = tls_active;
    if (p == nullptr) return nullptr;
    const bool outermost = p->depth_++ == 0;
    // Nested operators (the addmm inside a linear) and autograd nodes (a backward run while
    // profiling, and everything inside it) are neither counted nor timed.
    if (!outermost || fn.scope() != at::RecordScope::FUNCTION) return nullptr;
    const auto in = fn.inputs();  // ArrayRef<const IValue>; the counters take ArrayRef<IValue>
    return p->on_op_start(fn.name(), c10::ArrayRef<c10::IValue>(in.data(), in.size()));
  }

  // LibTorch calls the end callback for every start callback that ran, with ctx == nullptr
  // when start returned none.
  static void end(const at::RecordFunction& fn, at::ObserverContext* ctx) {
    FlopsProfiler* p = tls_active;
    if (p == nullptr) return;
    if (p->depth_ > 0) --p->depth_;
    if (ctx != nullptr) p->on_op_end(static_cast<FlopsProfiler::OpFrame&>(*ctx), fn.outputs());
  }
};

FlopsProfiler::FlopsProfiler(torch::nn::Module& model) : model_(&model) {}

FlopsProfiler::~FlopsProfiler() {
  try {
    stop();
  } catch (...) {  // destructors never throw
  }
}

void FlopsProfiler::start() {
  DS_CHECK(tls_active == nullptr || tls_active == this, Error,
           "FlopsProfiler::start: another flops profiler is already running on this thread "
           "(stop it first)");
  stop();
  index_ = std::make_unique<ModuleIndex>(*model_);
  self_.assign(index_->nodes().size(), SelfCost{});
  last_param_module_ = -1;
  depth_ = 0;
  tls_active = this;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&ProfilerCallbacks::start, &ProfilerCallbacks::end)
          .needsInputs(true)
          .needsOutputs(true)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION}));
  running_ = true;
}

void FlopsProfiler::stop() {
  if (!running_) return;
  at::removeCallback(handle_);
  handle_ = 0;
  if (tls_active == this) tls_active = nullptr;
  running_ = false;
}

std::unique_ptr<FlopsProfiler::OpFrame> FlopsProfiler::on_op_start(
    const char* name, c10::ArrayRef<c10::IValue> inputs) {
  auto frame = std::make_unique<OpFrame>();
  // The module: the owner of the first parameter the operator reads; else the context of the
  // latest parameter-reading operator (attention's matmuls and softmax after c_attn → attn).
  int module = -1;
  for (const auto& v : inputs) {
    if (!v.isTensor()) continue;
    module = index_->owner_of(v.toTensor());
    if (module >= 0) break;
  }
  if (module >= 0) {
    last_param_module_ = module;
  } else {
    module = index_->context_after(last_param_module_);
  }
  frame->module = module;

  switch (op_kind(name)) {
    case OpKind::kCounted:
      frame->cost = op_cost(name, inputs);
      break;
    case OpKind::kConvolution:
      if (inputs.size() >= 3 && inputs[0].isTensor() && inputs[1].isTensor()) {
        frame->convolution = true;
        frame->conv_input = inputs[0].toTensor().sizes().vec();
        frame->conv_weight = inputs[1].toTensor().sizes().vec();
        frame->conv_bias = inputs[2].isTensor() && inputs[2].toTensor().defined();
        frame->conv_transposed = conv_is_transposed(name, inputs);
      }
      break;
    case OpKind::kIgnored:
      break;
  }
  frame->start = Clock::now();
  return frame;
}

void FlopsProfiler::on_op_end(OpFrame& frame, const std::vector<c10::IValue>& outputs) {
  const auto stop_time = Clock::now();
  if (frame.convolution && !outputs.empty() && outputs[0].isTensor()) {
    const auto out = outputs[0].toTensor().sizes();
    frame.cost = conv_cost(ConvShapes{frame.conv_input, frame.conv_weight, out, frame.conv_bias,
                                      frame.conv_transposed});
  }
  if (frame.module < 0 || static_cast<size_t>(frame.module) >= self_.size()) return;
  SelfCost& c = self_[static_cast<size_t>(frame.module)];
  c.flops += frame.cost.flops;
  c.macs += frame.cost.macs;
  c.latency_s += std::chrono::duration<double>(stop_time - frame.start).count();
  c.ops += 1;
}

ModuleProfile FlopsProfiler::result() const {
  if (!index_) return ModuleIndex(*model_).build({});
  return index_->build(self_);
}

int64_t FlopsProfiler::total_flops() const {
  int64_t n = 0;
  for (const auto& c : self_) n += c.flops;
  return n;
}

int64_t FlopsProfiler::total_macs() const {
  int64_t n = 0;
  for (const auto& c : self_) n += c.macs;
  return n;
}

int64_t FlopsProfiler::total_params() const {
  return index_ ? index_->nodes().front().params : ModuleIndex(*model_).nodes().front().params;
}

double FlopsProfiler::total_latency_s() const {
  double s = 0;
  for (const auto& c : self_) s += c.latency_s;
  return s;
}

int64_t FlopsProfiler::total_ops() const {
  int64_t n = 0;
  for (const auto& c : self_) n += c.ops;
  return n;
}

std::string FlopsProfiler::render(const ProfileTimings& timings,
                                  const FlopsProfilerConfig& config) const {
  return render_profile(result(), timings, config);
}

void FlopsProfiler::print(const ProfileTimings& timings, const FlopsProfilerConfig& config) const {
  write_profile(render(timings, config), config);
}

}  // namespace ds::profiling
