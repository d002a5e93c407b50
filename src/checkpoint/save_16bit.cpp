// save_16bit_model (DeepSpeed's gather_16bit_weights_on_model_save): the whole model as one
// safetensors file, whatever cut it — ZeRO-3 partitions, AutoTP slices, pipeline stages.
#include <filesystem>
#include <unordered_set>

#include "checkpoint/checkpointer.h"
#include "checkpoint/state_files.h"
#include "comm/agreement.h"
#include "nn/tensor_buffer.h"

namespace ds::checkpoint {
namespace {

namespace fs = std::filesystem;
using Named = std::vector<std::pair<std::string, torch::Tensor>>;

// Every stage's tensors to stage 0's leader (world rank 0), in stage order — the model's order — a
// name held by two stages (a tied parameter's copy) kept once. Collective over `leaders`.
Named collect_stages(comm::Communicator& leaders, Named mine) {
  nlohmann::json list = nlohmann::json::array();
  for (const auto& [name, t] : mine) list.push_back({name, t.sizes().vec(), static_cast<int>(t.scalar_type())});
  const auto stages = comm::all_gather_text(leaders, list.dump(), "save_16bit_model_names");
  Named out;
  std::unordered_set<std::string> seen;
  for (int s = 0; s < leaders.size(); ++s) {
    const auto entries = nlohmann::json::parse(stages[size_t(s)]);
    for (size_t i = 0; i < entries.size(); ++i) {
      torch::Tensor t = s == leaders.rank() ? mine[i].second
                                            : torch::empty(entries[i][1].get<std::vector<int64_t>>(),
                                                           static_cast<torch::ScalarType>(entries[i][2].get<int>()));
      // As bytes: any dtype (a bool mask buffer too) travels the same way.
      if (s > 0) leaders.broadcast(nn::as_buffer(t.reshape({-1}).view(torch::kUInt8)), s, "save_16bit_model");
      if (leaders.rank() == 0 && seen.insert(entries[i][0].get<std::string>()).second)
        out.emplace_back(entries[i][0].get<std::string>(), t);
    }
  }
  return out;
}

}  // namespace

void save_16bit_model(const EngineStates& p, const std::string& dir, const std::string& file) {
  // One writer: rank 0 of `comm` (under TP the world's rank 0, which holds TP rank 0's slices). With
  // pipeline stages each stage's leader collects its stage's tensors, and they travel to rank 0.
  const bool rank0 = p.comm.rank() == 0;
  const bool collects = p.pipeline ? p.stage_leaders != nullptr : rank0;
  const std::unordered_set<std::string> copies(p.pipeline_copies.begin(), p.pipeline_copies.end());
  Named tensors;
  std::unordered_set<const void*> seen;
  for (const auto& item : p.module.named_parameters()) {
    if (!seen.insert(item.value().unsafeGetTensorImpl()).second || copies.contains(item.key())) continue;
    // Stage 3: gather one parameter at a time (every rank takes part), keep rank 0's copy.
    const bool trainable = item.value().requires_grad();
    if (trainable) p.states.hold({item.key()});
    torch::Tensor t = item.value().detach();
    if (p.tensor_parallel) t = p.tensor_parallel->gather_full(item.key(), t);  // collective over the TP group
    if (collects) {
      if (trainable && t.is_floating_point()) t = t.to(p.model_dtype);
      tensors.emplace_back(item.key(), t.to(torch::kCPU, /*non_blocking=*/false, /*copy=*/true).contiguous());
    }
    if (trainable) p.states.unhold({item.key()});
  }
  for (const auto& item : p.module.named_buffers())
    if (collects && seen.insert(item.value().unsafeGetTensorImpl()).second)
      tensors.emplace_back(item.key(), item.value().detach().to(torch::kCPU).contiguous());
  if (p.pipeline && p.stage_leaders != nullptr) tensors = collect_stages(*p.stage_leaders, std::move(tensors));
  std::exception_ptr error;
  if (rank0) {
    try {
      std::error_code ec;
      fs::create_directories(dir, ec);
      write_tensor_file((fs::path(dir) / file).string(), tensors, {{"format", "pt"}});
    } catch (...) {
      error = std::current_exception();
    }
  }
  comm::agree_or_throw(p.comm, error, "save_16bit_model");  // every rank learns the writer's outcome
}

}  // namespace ds::checkpoint
