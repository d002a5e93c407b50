#include "zero/streamed_param_gather.h"

#include <algorithm>

#include "nn/tensor_buffer.h"
#include "optim/tiles.h"
#include "util/error.h"

namespace ds::zero {

StreamedParamGather::StreamedParamGather(comm::Communicator& comm, PrecisionBuffers& precision,
                                         const std::vector<FlatPartition>& partitions, int64_t bucket)
    : comm_(comm), precision_(precision), partitions_(partitions) {
  const int world = comm_.size();
  for (const FlatPartition& part : partitions_) {
    const int64_t whole = part.partition_size();
    // Tile-aligned, so the optimizer's pieces end where its whole-span pass has no scalar tail.
    const int64_t per = std::max<int64_t>(bucket / world / optim::kTileAlign * optim::kTileAlign, optim::kTileAlign);
    chunk_.push_back(world == 1 || per >= whole ? whole : per);
  }
  updated_.assign(partitions_.size(), 0);
  started_.assign(partitions_.size(), 0);
}

StreamedParamGather::~StreamedParamGather() = default;  // work_ waits for a chunk still in flight

void StreamedParamGather::updated(size_t g, int64_t offset, int64_t numel) {
  DS_ASSERT(g < updated_.size() && offset == updated_[g] && offset + numel <= partitions_[g].partition_size(),
            "a partition's updated pieces come in order");
  updated_[g] += numel;
  // Chunks start in (group, offset) order on every rank: the first one not fully updated stops it.
  for (size_t k = 0; k < partitions_.size(); ++k) {
    const int64_t whole = partitions_[k].partition_size();
    while (started_[k] < whole) {
      const int64_t n = std::min(chunk_[k], whole - started_[k]);
      if (started_[k] + n > updated_[k]) return;
      start(k, started_[k], n);
      started_[k] += n;
    }
  }
}

void StreamedParamGather::start(size_t g, int64_t offset, int64_t numel) {
  const FlatPartition& part = partitions_[g];
  const int world = comm_.size(), rank = comm_.rank();
  if (world == 1) {
    precision_.refresh_compute(g, offset, numel);
    return;
  }
  if (!in_flight_.empty()) land();
  const torch::Tensor& storage = precision_.storage(g);
  const bool in_place = numel == part.partition_size();
  in_flight_.push_back({g, offset, numel, in_place});
  if (in_place) {  // the whole partition: straight into the storage, no staging
    work_ = comm_.all_gather_async(nn::as_buffer(storage.narrow(0, part.begin(rank), numel)),
                                   nn::as_buffer(storage.narrow(0, 0, numel * world)), "allgather_parameters");
    return;
  }
  const int64_t bytes = numel * world * static_cast<int64_t>(storage.element_size());
  if (!staging_.defined() || staging_.numel() < bytes) staging_ = torch::empty({bytes}, torch::kUInt8);
  torch::Tensor wire = staging_.narrow(0, 0, bytes).view(storage.scalar_type());
  torch::Tensor mine = wire.narrow(0, rank * numel, numel);
  mine.copy_(storage.narrow(0, part.begin(rank) + offset, numel));
  work_ = comm_.all_gather_async(nn::as_buffer(mine), nn::as_buffer(wire), "allgather_parameters");
}

void StreamedParamGather::land() {
  const InFlight f = in_flight_.front();
  in_flight_.clear();
  work_.wait();
  const FlatPartition& part = partitions_[f.group];
  if (f.in_place) {
    precision_.refresh_compute(f.group);
    return;
  }
  const torch::Tensor& storage = precision_.storage(f.group);
  torch::Tensor wire = staging_.narrow(0, 0, f.numel * part.world() * static_cast<int64_t>(storage.element_size()))
                           .view(storage.scalar_type());
  torch::NoGradGuard no_grad;
  for (int q = 0; q < part.world(); ++q) {
    const int64_t at = part.begin(q) + f.offset;
    if (q != comm_.rank()) storage.narrow(0, at, f.numel).copy_(wire.narrow(0, q * f.numel, f.numel));
    precision_.refresh_compute(f.group, at, f.numel);
  }
}

void StreamedParamGather::finish() {
  for (size_t g = 0; g < partitions_.size(); ++g)
    DS_ASSERT(started_[g] == partitions_[g].partition_size(), "every piece of the partition was updated");
  if (!in_flight_.empty()) land();
  std::fill(updated_.begin(), updated_.end(), 0);
  std::fill(started_.begin(), started_.end(), 0);
  staging_ = torch::Tensor();  // between steps nothing is held
}

}  // namespace ds::zero
