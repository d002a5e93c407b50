#include "zero/collectives.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "comm/work.h"

#include "comm/gradients.h"
#include "comm/kernels.h"
#include "util/error.h"

namespace ds::zero {
namespace {

int64_t chunk_of(const torch::Tensor& t, int world) {
  DS_ASSERT(t.numel() % world == 0, "tensor must split into world equal chunks");
  return t.numel() / world;
}

// The elements per rank of one packed bucket: at least 1, at most the chunk.
int64_t per_rank_bucket(int64_t bucket, int world, int64_t chunk) {
  return std::clamp<int64_t>(bucket / world, 1, std::max<int64_t>(chunk, 1));
}

}  // namespace

namespace {
// DeepSpeed's averaging around a sum (comm/gradients.h average_gradients): prescale divides by the
// world before the sum; otherwise divide by predivide_factor before and multiply by
// predivide_factor / world after.
void scale_before_sum(const torch::Tensor& t, Averaging avg, int world) {
  if (!(avg.predivide_factor > 0))
    throw ConfigError("gradient_predivide_factor", fmt::format("must be > 0 (got {})", avg.predivide_factor));
  const double pre = avg.prescale ? 1.0 / world : 1.0 / avg.predivide_factor;
  if (pre != 1.0) comm::scale_elements(as_buffer(t), pre);
}

void scale_after_sum(const torch::Tensor& t, Averaging avg, int world) {
  if (!avg.prescale && avg.predivide_factor != world) comm::scale_elements(as_buffer(t), avg.predivide_factor / world);
}
}  // namespace

void allreduce_average(comm::Communicator& comm, const torch::Tensor& t, Averaging avg, int64_t bucket,
                       std::string_view tag) {
  if (comm.size() == 1) return;
  bucket = std::max<int64_t>(1, bucket);
  for (int64_t off = 0; off < t.numel(); off += bucket) {
    auto chunk = t.narrow(0, off, std::min(bucket, t.numel() - off));
    comm::average_gradients(comm, as_buffer(chunk), avg.predivide_factor, avg.prescale, tag);
  }
}

void reduce_scatter_average(comm::Communicator& comm, const torch::Tensor& t, Averaging avg, int64_t bucket,
                            std::string_view tag) {
  const int world = comm.size(), rank = comm.rank();
  if (world == 1) return;
  const int64_t chunk = chunk_of(t, world);
  scale_before_sum(t, avg, world);  // the sum being a reduce-scatter
  auto mine = t.narrow(0, rank * chunk, chunk);
  if (t.numel() <= bucket) {
    comm.reduce_scatter(as_buffer(t), as_buffer(mine), comm::ReduceOp::Sum, tag);
  } else {
    const int64_t per = per_rank_bucket(bucket, world, chunk);
    auto packed = torch::empty({per * world}, t.options());
    auto chunks = t.view({world, chunk});
    for (int64_t off = 0; off < chunk; off += per) {
      const int64_t len = std::min(per, chunk - off);
      auto pk = packed.narrow(0, 0, len * world);
      pk.view({world, len}).copy_(chunks.narrow(1, off, len));
      auto out = pk.narrow(0, rank * len, len);
      comm.reduce_scatter(as_buffer(pk), as_buffer(out), comm::ReduceOp::Sum, tag);
      mine.narrow(0, off, len).copy_(out);
    }
  }
  scale_after_sum(mine, avg, world);
}

std::function<void()> reduce_scatter_average_async(comm::Communicator& comm, torch::Tensor t, Averaging avg,
                                                   std::string_view tag) {
  const int world = comm.size(), rank = comm.rank();
  if (world == 1) return {};
  const int64_t chunk = chunk_of(t, world);
  scale_before_sum(t, avg, world);
  auto mine = t.narrow(0, rank * chunk, chunk);
  auto work = std::make_shared<comm::Work>(comm.reduce_scatter_async(as_buffer(t), as_buffer(mine), comm::ReduceOp::Sum, tag));
  return [work, t, mine, avg, world] {
    work->wait();
    scale_after_sum(mine, avg, world);
  };
}

std::function<void()> reduce_average_async(comm::Communicator& comm, torch::Tensor t, int root, Averaging avg,
                                           std::string_view tag) {
  const int world = comm.size();
  if (world == 1) return {};
  scale_before_sum(t, avg, world);
  auto work = std::make_shared<comm::Work>(comm.reduce_async(as_buffer(t), root, comm::ReduceOp::Sum, tag));
  return [work, t, avg, world, owner = comm.rank() == root] {
    work->wait();
    if (owner) scale_after_sum(t, avg, world);
  };
}

std::function<void()> allreduce_average_async(comm::Communicator& comm, torch::Tensor t, Averaging avg,
                                              std::string_view tag) {
  const int world = comm.size();
  if (world == 1) return {};
  scale_before_sum(t, avg, world);
  auto work = std::make_shared<comm::Work>(comm.all_reduce_async(as_buffer(t), comm::ReduceOp::Sum, tag));
  return [work, t, avg, world] {
    work->wait();
    scale_after_sum(t, avg, world);
  };
}

void broadcast_from_rank0(comm::Communicator& comm, const torch::Tensor& t, std::string_view tag) {
  if (comm.size() == 1) return;
  comm.broadcast(as_buffer(t), 0, tag);
}

}  // namespace ds::zero
