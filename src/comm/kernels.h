// Element-wise kernels the collectives and helpers run on raw buffers: reduction of two buffers
// (sum / max / min) and scaling by a constant. 16-bit floats are widened to fp32, combined, and
// rounded back to nearest-even once per call, which is how one step of a ring reduction rounds.
#pragma once

#include <cstdint>

#include "comm/types.h"

namespace ds::comm {

// dst[i] = a[i] op b[i] for i < n; dst may alias a or b. Max/min propagate NaN.
void reduce_elements(void* dst, const void* a, const void* b, int64_t n, ElemType type, ReduceOp op);

// buf[i] *= factor. Floating types only (throws ds::NotSupported otherwise). Like PyTorch's
// tensor.mul_(python_float): the factor is rounded to fp32 for fp32/bf16/fp16 buffers, the product
// is formed in fp32 and rounded once to the buffer's type.
void scale_elements(Buffer buf, double factor);

// buf[i] /= divisor, like torch's tensor.div_(int): a true division in fp32 (the divisor rounded to
// fp32) for fp32/bf16/fp16 buffers, rounded once. Floating types only.
void divide_elements(Buffer buf, double divisor);

// dst = src (same count and type), via memmove.
void copy_elements(Buffer dst, ConstBuffer src);

// Fills buf with zeros.
void zero_elements(Buffer buf);

}  // namespace ds::comm
