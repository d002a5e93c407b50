// The 16-bit formats the fused Adam copy-out writes. Its own header because the per-ISA kernel
// files may include only headers without inline functions (see kernel_spans.h).
#pragma once

#include <cstdint>

namespace ds::optim {

enum class HalfType { Bf16, Fp16 };

// A destination for 16-bit copies of updated parameters: n elements of `type` at `data`.
struct HalfSpan {
  std::uint16_t* data = nullptr;
  HalfType type = HalfType::Bf16;
};

}  // namespace ds::optim
