// Block-wise symmetric int8 quantization, as DeepSpeed's ZeRO++ qwZ does it (CUDAQuantizer over
// csrc/quantization: quantize with groups, 8 bits, Symmetric). A tensor of n elements is cut into
// `groups` equal groups; each group g keeps one fp32 value, inv_scale = 2 max|x| / 256, and its
// elements become q = round_half_even(x * 128 / max|x|) clamped to [-128, 127]; dequantized,
// x' = q * inv_scale, within inv_scale / 2 of x. An all-zero group has scale 1.
//
// qgZ's gradients go as int4 (quantize_int4): symmetric, q = round(x * 7 / max|x|) in [-7, 7], so
// every value is within half a step; DeepSpeed's 16 / (2 max) scale would send each group's largest
// value to 8 and clip it to 7, a 1/8 shrink of the extremes that biases the gradient norm. Groups of
// any length (each starting on a byte), two values per byte, low nibble first.
#pragma once

#include <cstdint>
#include <span>

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

// Bytes of the packed int4 values of groups of these lengths.
int64_t int4_bytes(std::span<const int64_t> group_len);
// packed[int4_bytes(group_len)], inv_scales[group_len.size()]: x (the sum of group_len elements),
// group by group, q = round_half_even(x * 7 / max|x|), inv_scale = max / 7 (1 for an all-zero group).
void quantize_int4(const float* x, std::span<const int64_t> group_len, uint8_t* packed, float* inv_scales);
// out += the dequantized values (q * inv_scale of its group): a reduction adds rank after rank.
void dequantize_int4_add(const uint8_t* packed, std::span<const int64_t> group_len, const float* inv_scales,
                         float* out);

}  // namespace ds::comm::quant
