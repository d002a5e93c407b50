// 1-bit compression kernels (DeepSpeed's compressed_allreduce, the heart of 1-bit Adam/LAMB and 0/1
// Adam). A float becomes one sign bit: 1 for x >= 0 (DeepSpeed computes sign(x) + 1 and casts it to
// bool, so zero and -0 count as +), packed 8 per byte with the first element in the most significant
// bit (numpy / cupy packbits order). A packed block stands for scale * (+1 | -1) per element.
//
// Error feedback: a tensor is compressed together with what compression dropped last time,
//   c = x + error;  scale = ||c|| / sqrt(n);  error = c - scale * sign(c);  bits = sign(c)
// so nothing is lost for good: the sum of the messages tracks the sum of the inputs within one error.
#pragma once

#include <cstdint>

namespace ds::comm::onebit {

// bits[ceil(n / 8)] = the signs of x[0, n); a last partial byte is padded with zero bits.
void pack_signs(const float* x, int64_t n, uint8_t* bits);

// out[i] = (bit i ? scale : -scale) for i < n.
void unpack_signs(const uint8_t* bits, int64_t n, float scale, float* out);

// acc[i] += (bit i ? scale : -scale) for i < n.
void accumulate_signs(const uint8_t* bits, int64_t n, float scale, float* acc);

// The sum of squares of c = x + error over n elements, where x holds n_x <= n elements (zeros past
// them, the padding of a tensor to a chunk multiple). x may be null (all zeros).
double feedback_sum_of_squares(const float* x, int64_t n_x, const float* error, int64_t n);

// DeepSpeed's scale from that sum: ||c|| in fp32, divided by sqrt(n) in fp32.
float feedback_scale(double sum_of_squares, int64_t n);

// Compresses c = x + error (as above) with `scale`: bits[n / 8] = sign(c), error = c - scale * sign(c).
// n is a multiple of 8.
void pack_with_feedback(const float* x, int64_t n_x, float* error, int64_t n, float scale, uint8_t* bits);

}  // namespace ds::comm::onebit
