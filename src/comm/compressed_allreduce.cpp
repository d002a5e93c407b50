#include "comm/compressed_allreduce.h"

#include <algorithm>
#include <numeric>

#include "comm/onebit.h"
#include "util/error.h"

namespace ds::comm {

CompressedAllReduce::CompressedAllReduce(Communicator& comm, std::vector<int64_t> numels)
    : comm_(comm), world_(comm.size()) {
  const int64_t p = world_;
  const int64_t divider = 8 * p / std::gcd(p, int64_t(8));
  const int64_t unit = p * divider;
  int64_t largest_chunk = 0;
  for (int64_t n : numels) {
    DS_CHECK(n >= 0, CommError, "CompressedAllReduce: a tensor of " + std::to_string(n) + " elements");
    Tensor t;
    t.numel = n;
    t.padded = (n + unit - 1) / unit * unit;
    t.chunk = t.padded / p;
    t.byte_offset = block_bytes_;
    block_bytes_ += t.chunk / 8;
    largest_chunk = std::max(largest_chunk, t.chunk);
    if (world_ > 1) {
      t.worker_error.assign(size_t(t.padded), 0.0f);
      t.server_error.assign(size_t(t.chunk), 0.0f);
    }
    t_.push_back(std::move(t));
  }
  if (world_ == 1) return;
  const size_t s = t_.size(), all = size_t(block_bytes_ * p);
  send_.resize(all);
  recv_.resize(all);
  gathered_bits_.resize(all);
  server_bits_.resize(size_t(block_bytes_));
  scales_.resize(s);
  server_scales_.resize(s);
  gathered_scales_.resize(s * size_t(p));
  gathered_server_scales_.resize(s * size_t(p));
  acc_.resize(size_t(largest_chunk));
}

void CompressedAllReduce::run(std::span<float* const> tensors) {
  DS_CHECK(tensors.size() == t_.size(), CommError,
           "CompressedAllReduce::run: " + std::to_string(tensors.size()) + " tensors for a set of " +
               std::to_string(t_.size()));
  if (world_ == 1 || t_.empty()) return;
  const int p = world_;
  const size_t s = t_.size();
  const float inv_p = float(1.0 / p);  // DeepSpeed: scale.mul_(1 / size) in fp32
  // 1. Worker: compress tensor + worker error; chunk r of the signs goes to rank r. Tensors are
  // independent (each one's sum in one thread, so results do not depend on the thread count).
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < s; ++i) {
    Tensor& t = t_[i];
    float* e = t.worker_error.data();
    scales_[i] = onebit::feedback_scale(onebit::feedback_sum_of_squares(tensors[i], t.numel, e, t.padded), t.padded);
    for (int r = 0; r < p; ++r) {
      const int64_t begin = r * t.chunk;
      const int64_t n_x = std::clamp<int64_t>(t.numel - begin, 0, t.chunk);
      onebit::pack_with_feedback(tensors[i] + begin, n_x, e + begin, t.chunk, scales_[i],
                                 send_.data() + r * block_bytes_ + t.byte_offset);
    }
  }
  comm_.all_to_all(ConstBuffer(send_.data(), int64_t(send_.size())), Buffer(recv_.data(), int64_t(recv_.size())),
                   "onebit_signs");
  comm_.all_gather(ConstBuffer(scales_.data(), int64_t(s)), Buffer(gathered_scales_.data(), int64_t(s) * p),
                   "onebit_scales");
  // 2. Server: average this rank's chunk over the ranks, add the server error, compress again.
  for (size_t i = 0; i < s; ++i) {
    Tensor& t = t_[i];
    std::fill(acc_.begin(), acc_.begin() + t.chunk, 0.0f);
    for (int j = 0; j < p; ++j)
      onebit::accumulate_signs(recv_.data() + j * block_bytes_ + t.byte_offset, t.chunk,
                               gathered_scales_[size_t(j) * s + i] * inv_p, acc_.data());
    float* e = t.server_error.data();
    server_scales_[i] = onebit::feedback_scale(onebit::feedback_sum_of_squares(acc_.data(), t.chunk, e, t.chunk), t.chunk);
    onebit::pack_with_feedback(acc_.data(), t.chunk, e, t.chunk, server_scales_[i], server_bits_.data() + t.byte_offset);
  }
  // 3. Everyone gathers the server chunks and decodes them.
  comm_.all_gather(ConstBuffer(server_bits_.data(), block_bytes_), Buffer(gathered_bits_.data(), block_bytes_ * p),
                   "onebit_server_signs");
  comm_.all_gather(ConstBuffer(server_scales_.data(), int64_t(s)),
                   Buffer(gathered_server_scales_.data(), int64_t(s) * p), "onebit_server_scales");
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < s; ++i) {
    const Tensor& t = t_[i];
    for (int j = 0; j < p; ++j) {
      const int64_t begin = j * t.chunk;
      const int64_t n = std::clamp<int64_t>(t.numel - begin, 0, t.chunk);
      onebit::unpack_signs(gathered_bits_.data() + j * block_bytes_ + t.byte_offset, n,
                           gathered_server_scales_[size_t(j) * s + i], tensors[i] + begin);
    }
  }
}

void CompressedAllReduce::reset_errors() {
  for (auto& t : t_) {
    std::fill(t.worker_error.begin(), t.worker_error.end(), 0.0f);
    std::fill(t.server_error.begin(), t.server_error.end(), 0.0f);
  }
}

std::vector<float> CompressedAllReduce::errors() const {
  std::vector<float> out;
  for (const auto& t : t_) out.insert(out.end(), t.worker_error.begin(), t.worker_error.end());
  for (const auto& t : t_) out.insert(out.end(), t.server_error.begin(), t.server_error.end());
  return out;
}

bool CompressedAllReduce::set_errors(std::span<const float> errors) {
  size_t n = 0;
  for (const auto& t : t_) n += t.worker_error.size() + t.server_error.size();
  if (errors.size() != n) return false;
  const float* at = errors.data();
  for (auto& t : t_) {
    std::copy(at, at + t.worker_error.size(), t.worker_error.begin());
    at += t.worker_error.size();
  }
  for (auto& t : t_) {
    std::copy(at, at + t.server_error.size(), t.server_error.begin());
    at += t.server_error.size();
  }
  return true;
}

int64_t CompressedAllReduce::held_bytes() const {
  int64_t b = 0;
  for (const auto& t : t_) b += int64_t(sizeof(float) * (t.worker_error.size() + t.server_error.size()));
  b += int64_t(send_.size() + recv_.size() + server_bits_.size() + gathered_bits_.size());
  b += int64_t(sizeof(float) * (scales_.size() + server_scales_.size() + gathered_scales_.size() +
                                gathered_server_scales_.size() + acc_.size()));
  return b;
}

}  // namespace ds::comm
