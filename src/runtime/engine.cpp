#include "runtime/engine.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "util/error.h"
#include "util/logging.h"

namespace ds {

Engine::Engine(std::shared_ptr<torch::nn::Module> module, Config config, std::vector<ParamGroup> groups)
    : module_(std::move(module)), config_(std::move(config)) {
  DS_CHECK(module_ != nullptr, Error, "ds::initialize: model is null");
  DS_ASSERT(config_.train_batch_size == config_.train_micro_batch_size_per_gpu *
                                            config_.gradient_accumulation_steps * world_size(),
            "batch triple was resolved for a different world size");
  setup_parameters(groups);
  setup_optimizer(groups);
  log::info("engine ready: {} trainable parameters in {} flat group(s) on {}; batch {} = micro {} x GAS {} x world {}",
            flat_->numel(), flat_->groups().size(), device_.str(), config_.train_batch_size,
            config_.train_micro_batch_size_per_gpu, config_.gradient_accumulation_steps, world_size());
  report_progress();
}

Engine::Engine(Engine&&) noexcept = default;
Engine& Engine::operator=(Engine&&) noexcept = default;
Engine::~Engine() = default;

bool Engine::is_gradient_accumulation_boundary() const {
  return (micro_steps_ + 1) % config_.gradient_accumulation_steps == 0;
}

void Engine::before_forward() {
  // User code may have replaced .grad (Module::zero_grad(set_to_none)); put the views back.
  flat_->rebind_grads();
}

void Engine::backward(const torch::Tensor& loss) {
  DS_CHECK(loss.defined() && loss.numel() == 1, Error,
           fmt::format("engine.backward expects a scalar loss, got a tensor of shape {}",
                       loss.defined() ? fmt::format("{}", loss.sizes().vec()) : "undefined"));
  flat_->rebind_grads();
  torch::Tensor scaled = loss;
  if (config_.gradient_accumulation_steps > 1)
    scaled = loss.to(torch::kFloat32) / static_cast<double>(config_.gradient_accumulation_steps);
  loss_accum_ += scaled.detach().item<double>();
  scaled.backward();
}

double Engine::clip_gradients() {
  // DeepSpeed's fp32 path: L2 of the per-tensor L2 norms; coef = min(1, clip / (norm + 1e-6)).
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> norms;
  for (const auto& g : flat_->groups())
    for (const auto& s : g.slots) norms.push_back(g.grads.narrow(0, s.offset, s.numel).norm());
  const double norm = torch::stack(norms).norm().item<double>();
  if (!std::isfinite(norm)) return -1.0;
  const double coef = config_.gradient_clipping / (norm + 1e-6);
  if (coef < 1.0)
    for (auto& g : flat_->groups()) g.grads.mul_(coef);
  return norm;
}

void Engine::step() {
  if (is_gradient_accumulation_boundary()) {
    if (!optimizer_)
      throw ConfigError("optimizer", "engine.step() needs an optimizer; add an \"optimizer\" section to the config");
    if (config_.gradient_clipping > 0.0) last_grad_norm_ = clip_gradients();
    optimizer_->step();
    flat_->zero_grads();
    if (config_.steps_per_print && *config_.steps_per_print > 0 &&
        (global_steps_ + 1) % *config_.steps_per_print == 0)
      report_progress();
    global_steps_ += 1;
    global_samples_ += config_.train_batch_size;
    last_loss_ = loss_accum_;
    loss_accum_ = 0.0;
  }
  micro_steps_ += 1;
}

std::vector<double> Engine::get_lr() const {
  if (optimizer_) return optimizer_->lrs();
  return {};
}

void Engine::report_progress() const {
  // DeepSpeed's line: "step=<n>, skipped=<k>, lr=[...], mom=[...]".
  if (!config_.steps_per_print) return;
  std::vector<std::string> moms;
  if (config_.optimizer)
    moms.push_back(fmt::format("({}, {})", config_.optimizer->params.betas[0], config_.optimizer->params.betas[1]));
  log::info("step={}, skipped={}, lr={}, mom=[{}]", global_steps_, skipped_steps_, get_lr(),
            fmt::join(moms, ", "));
}

std::string Engine::memory_report() const {
  return "memory held by the engine, per tier:\n" + ledger_.table();
}

}  // namespace ds
