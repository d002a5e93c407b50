// Block-wise symmetric int8 quantization, as DeepSpeed's ZeRO++ qwZ does it (CUDAQuantizer over
// csrc/quantization: quantize with groups, 8 bits, Symmetric). A tensor of n elements is cut into
// `groups` equal groups; each group g keeps one fp32 value, inv_scale = 2 max|x| / 256, and its
// elements become q = round_half_even(x * 128 / max|x|) clamped to [-128, 127]; dequantized,
// x' = q * inv_scale, within inv_scale / 2 of x. An all-zero group has scale 1.
#pragma once

#include <cstdint>

namespace ds::comm::quant {

// DeepSpeed's group count for n elements (CUDAQuantizer.quantize, target_group_size 8000): the
// smallest count >= ceil(n / 8000) that makes groups of a multiple of 8 elements, doubled while the
// groups stay above 8000 elements. n must be a multiple of 8 (ds::CommError otherwise, and when no
// count gives groups below 16000 elements, DeepSpeed's hard limit).
int64_t group_count(int64_t n);

// q[n], inv_scales[groups]; n % groups == 0.
void quantize_int8(const float* x, int64_t n, int64_t groups, int8_t* q, float* inv_scales);
// out[n] = q * inv_scale of its group.
void dequantize_int8(const int8_t* q, int64_t n, int64_t groups, const float* inv_scales, float* out);

}  // namespace ds::comm::quant
