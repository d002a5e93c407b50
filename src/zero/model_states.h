// ModelStates: where one ZeRO stage keeps the model states of this rank — 16-bit parameters,
// gradients, and the spans the optimizer steps — and how they move between ranks. The engine
// sequences a step through this interface; it never asks which stage it is talking to.
//
//   stage 0  ReplicatedStates   full parameters and gradients; gradients all-reduced at the boundary
//   stage 1  PartitionedStates  full parameters and gradients; gradients reduce-scattered at the
//                               boundary, the optimizer steps the rank's partition, parameters all-gathered
//   stage 2  PartitionedStates  as stage 1, but each gradient is reduced as autograd completes it and
//                               only the rank's partition is kept across micro-steps
//   stage 3  ShardedStates      parameters sharded too; gathered per layer (LayerList) or by guard
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "config/config.h"
#include "config/zero_plan.h"
#include "nn/layer_list.h"
#include "offload/host_memory.h"
#include "offload/param_swapper.h"
#include "precision/gradient_spans.h"
#include "util/memory_ledger.h"
#include "zero/dtype_plan.h"
#include "zero/flat_params.h"

namespace ds::zero {

class ModelStates {
 public:
  virtual ~ModelStates() = default;

  virtual int stage() const = 0;
  // Communicators the states made for themselves (ZeRO++'s node groups): their collective logs
  // hold traffic that the topology's do not.
  virtual std::vector<const comm::Communicator*> own_communicators() const { return {}; }
  // Before each forward: re-point what user code may have reset (e.g. .grad set to none).
  virtual void before_forward() {}
  // Around the engine's forward of the model (stage 3 checks the first one for reads of released
  // parameters and throws after it, naming the parameter).
  virtual void forward_started() {}
  virtual void forward_finished() {}
  // Makes every parameter current: waits for a gather of updated parameters still running behind
  // the forward (stages 1-2 with zero_overlap_param_gather). Called before parameters are read or
  // written outside a forward (checkpoints, exports, user access).
  virtual void settle_params() {}
  // After each backward: this micro-step's gradients are folded into the accumulated ones.
  virtual void after_backward() = 0;
  // At the accumulation boundary: gradients reduced across ranks, so local_grads is final.
  virtual void reduce_gradients() = 0;

  virtual size_t num_groups() const = 0;
  // The span the optimizer steps for group g (the whole group at stage 0, this rank's partition
  // otherwise): its length (padded_numel) and the named parameter pieces in it (slot offsets are
  // span offsets; slot.param is unset).
  virtual const FlatGroup& local_layout(size_t g) const = 0;
  // Model-dtype parameters of that span; the optimizer's fp32 master is made from it (or aliases it).
  virtual torch::Tensor local_params(size_t g) const = 0;
  // [offset, offset + numel) of it; stage 3 on NVMe reads only that range from disk.
  virtual torch::Tensor local_params_range(size_t g, int64_t offset, int64_t numel) const {
    return local_params(g).narrow(0, offset, numel);
  }
  // True when local_params must be read from disk (offload_param.device "nvme").
  virtual bool params_on_nvme() const { return false; }
  // fp32 gradients of that span, averaged over ranks (a view or a converted copy).
  virtual torch::Tensor local_grads(size_t g) const = 0;
  // True when local spans are partitions, so norms and overflow flags must be combined across ranks.
  virtual bool partitioned() const = 0;
  // local_grads of every group with the named pieces in them, as the step-wide checks read them.
  precision::GradientSpans gradient_spans() const;

  // After the optimizer: masters[g] (fp32, local span) is written to the 16-bit parameters and
  // the full parameters each rank needs are made current again.
  virtual void write_back(const std::vector<torch::Tensor>& masters) = 0;
  // The same, streamed (the NVMe optimizer hands out its master one sub-group at a time):
  // write_back_range for pieces that together cover every group's span, then finish_write_back.
  // By default the pieces are collected into a full fp32 copy for write_back; stage 3 writes each
  // piece to its shards at once, so no full master is ever in RAM.
  virtual void write_back_range(size_t g, int64_t offset, const torch::Tensor& master);
  virtual void finish_write_back();
  // Per group, the piece size (elements) in which write_back_range lets the parameters' exchange
  // start while the optimizer steps the rest; empty or 0: whole spans are as good.
  virtual std::vector<int64_t> write_back_pieces() const { return {}; }
  virtual void zero_grads() = 0;
  // The gradient accumulated so far for a named parameter, as a view: summing into it before
  // reduce_gradients changes what is reduced (a pipeline's tied copies). Stages 0 and 1 only: the
  // others reduce during backward, and throw NotSupported.
  virtual torch::Tensor accumulated_grad(const std::string& name);

  virtual int64_t numel() const = 0;  // trainable elements, without padding
  // The flat parameter buffers of stages 0-2 (nullptr at stage 3, where parameters are sharded).
  virtual const FlatParameters* flat() const { return nullptr; }

  // ZeRO-Offload overlap (stages 2-3, built with ModelStatesOptions::sub_group_steps): during the
  // next backward pass call ready(g, begin, end) as soon as [begin, end) of group g's local
  // gradients are final, the rest at its end. Returns false where the stage cannot.
  virtual bool arm_sub_group_steps(std::function<void(size_t, int64_t, int64_t)> ready) { return false; }

  // Stage 3: keep these parameters (all when empty) gathered until unhold; every rank must make
  // the same calls. Other stages hold whole parameters anyway, so these do nothing.
  virtual void hold(const std::vector<std::string>& names) {}
  virtual void unhold(const std::vector<std::string>& names) {}

  // offload_param.device "nvme": the parameter swapper's counters since the last reset.
  virtual std::optional<offload::ParamSwapStats> param_swap_stats() const { return std::nullopt; }
  virtual void reset_param_swap_stats() {}

 private:
  std::vector<torch::Tensor> write_back_staging_;  // default write_back_range
};

struct ModelStatesOptions {
  const Config* config = nullptr;
  ZeroPlan zero;  // the stage and where each state lives (resolve_zero_plan)
  DtypePlan plan;
  comm::Communicator* comm = nullptr;
  MemoryLedger* ledger = nullptr;
  Tier tier = Tier::Device;
  torch::nn::Module* module = nullptr;  // parameters already on the device, in the compute dtype
  nn::LayerList* layers = nullptr;      // the model's layer sequence, if it has one (stage 3 needs it)
  // ZeRO-Offload (offload_optimizer.device "cpu"): this rank's gradient partition lives in fp32 host
  // buffers (Tier::Cpu) — accumulated there as buckets are reduced (stages 2-3) or copied there at
  // the boundary (stage 1) — and local_grads returns them.
  bool offload_gradients = false;
  offload::HostMemoryPlan host;
  // This rank's node (world rank / ranks per node): hierarchical collectives (ZeRO++ qgZ) group by it.
  int node = 0;
  // > 0: track gradient completeness per sub-group of this many elements (arm_sub_group_steps).
  int64_t sub_group_steps = 0;
};

// Builds the stage options.zero names over `params` (trainable, distinct).
std::unique_ptr<ModelStates> make_model_states(const ModelStatesOptions& options, const std::vector<NamedParam>& params);

}  // namespace ds::zero
