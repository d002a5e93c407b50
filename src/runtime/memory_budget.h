// The memory budget checked before an engine allocates anything large: this machine's RAM for the
// model states of every local rank (zero/memory_estimate.h: the stage's layout rules), and the free
// space of the NVMe swap directories. Refusals name the numbers and what to change.
#pragma once

#include <torch/torch.h>

#include "config/config.h"
#include "zero/dtype_plan.h"

namespace ds {

struct BudgetInput {
  const Config* config = nullptr;
  zero::DtypePlan dtypes;
  int world = 1;                  // ranks the states are partitioned over
  torch::Device device = torch::kCPU;
};

// Throws OutOfMemory (RAM) or IoError (NVMe path, free space) before anything is written.
void check_memory_budget(torch::nn::Module& module, const BudgetInput& in);

}  // namespace ds
