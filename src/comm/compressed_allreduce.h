// CompressedAllReduce: DeepSpeed's compressed_allreduce (runtime/comm/nccl.py), the exchange of
// 1-bit Adam, 0/1 Adam and 1-bit LAMB, for a fixed set of fp32 tensors that move together.
//
// Each tensor keeps its own scale and two error buffers (onebit.h). Per call:
//   1. worker: every rank compresses tensor + worker error into signs and one scale, and sends chunk r
//      of the signs to rank r (all_to_all) and its scale to everyone (all_gather);
//   2. server: rank r averages its chunk over the ranks (scale_j / p * sign_j, summed), adds its
//      server error and compresses that again;
//   3. every rank gathers the server chunks (all_gather of signs and scales) and decodes the result.
// A tensor is padded to a multiple of p * divider elements, divider = 8p / gcd(p, 8) (DeepSpeed's), so
// every chunk is whole bytes; the padding lives in the error buffers only. All tensors share the four
// collectives (tags "onebit_*"), so a model of hundreds of tensors costs four collectives, not 4 x
// hundreds, with numbers equal to DeepSpeed's tensor-by-tensor calls. At world size 1 run() does
// nothing (DeepSpeed skips the call there).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/communicator.h"

namespace ds::comm {

class CompressedAllReduce {
 public:
  // `numels`: the element count of each tensor, in the order run() receives them. `comm` must
  // outlive this object.
  CompressedAllReduce(Communicator& comm, std::vector<int64_t> numels);

  // In place: tensors[i] (numels[i] floats) = the error-compensated 1-bit average over the ranks,
  // equal on every rank. Collective.
  void run(std::span<float* const> tensors);

  // Zeroes both error buffers of every tensor (DeepSpeed resets them on checkpoint load and, for 0/1
  // Adam, when its local steps begin).
  void reset_errors();

  // Every tensor's worker error, then every server error, concatenated (a checkpoint's rank-private
  // state); set_errors puts such a vector back and returns false, changing nothing, when its length
  // is not this set's (saved at another world size).
  std::vector<float> errors() const;
  bool set_errors(std::span<const float> errors);

  size_t num_tensors() const { return t_.size(); }
  int64_t padded_numel(size_t i) const { return t_[i].padded; }
  // This rank's error buffers of tensor i: worker [padded_numel], server [padded_numel / world].
  std::span<float> worker_error(size_t i) { return t_[i].worker_error; }
  std::span<float> server_error(size_t i) { return t_[i].server_error; }
  std::span<const float> worker_error(size_t i) const { return t_[i].worker_error; }
  std::span<const float> server_error(size_t i) const { return t_[i].server_error; }
  // Bytes held: the error buffers and the exchange buffers.
  int64_t held_bytes() const;

 private:
  struct Tensor {
    int64_t numel = 0, padded = 0, chunk = 0;  // chunk = padded / world, a multiple of 8
    int64_t byte_offset = 0;                   // of its chunk's signs in a rank's block
    std::vector<float> worker_error, server_error;
  };
  Communicator& comm_;
  int world_ = 1;
  std::vector<Tensor> t_;
  int64_t block_bytes_ = 0;  // one rank's share: the sum of chunk / 8
  std::vector<uint8_t> send_, recv_, server_bits_, gathered_bits_;
  std::vector<float> scales_, gathered_scales_, server_scales_, gathered_server_scales_, acc_;
};

}  // namespace ds::comm
