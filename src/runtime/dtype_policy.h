// The dtype policy (docs/mixed_precision.md): which dtype each piece of training state uses for a
// config on a device. The engine applies it at init; ds-estimate uses it to size the states.
#pragma once

#include <torch/torch.h>

#include "config/config.h"
#include "zero/dtype_plan.h"

namespace ds {

torch::ScalarType to_scalar_type(DType t);

zero::DtypePlan resolve_dtype_plan(const Config& c, torch::Device device);

}  // namespace ds
