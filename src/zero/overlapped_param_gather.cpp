#include "zero/overlapped_param_gather.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <string>
#include <unordered_map>

#include "nn/tensor_buffer.h"
#include "util/error.h"

namespace ds::zero {

OverlappedParamGather::OverlappedParamGather(comm::Communicator& comm, const FlatParameters& flat,
                                             PrecisionBuffers& precision, const nn::LayerList& layers, int64_t bucket)
    : comm_(comm), flat_(flat), precision_(precision), work_(kInFlight) {
  const int world = comm_.size(), rank = comm_.rank();
  const auto& groups = flat_.groups();
  // Each group's buckets (allgather_bucket_size / world elements per rank), and where each parameter lives.
  std::vector<std::vector<Bucket>> per_group(groups.size());
  std::vector<int64_t> per_rank(groups.size());
  struct Where {
    size_t group;
    int64_t offset, numel;
  };
  std::unordered_map<std::string, std::vector<Where>> where;
  for (size_t g = 0; g < groups.size(); ++g) {
    const int64_t c = chunk(g);
    per_rank[g] = std::clamp<int64_t>(bucket / world, 1, std::max<int64_t>(c, 1));
    for (int64_t off = 0; off < c; off += per_rank[g]) per_group[g].push_back({g, off, std::min(per_rank[g], c - off)});
    for (const auto& s : groups[g].slots) where[s.name].push_back({g, s.offset, s.numel});
  }
  // The first layer reading each bucket (from any rank's partition: the order must be the same on
  // every rank), and the buckets each layer reads from the others' partitions (what it waits for).
  constexpr size_t kNever = std::numeric_limits<size_t>::max();
  std::vector<std::vector<size_t>> first(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) first[g].assign(per_group[g].size(), kNever);
  std::vector<std::vector<std::pair<size_t, size_t>>> reads(layers.size());  // (group, bucket) from others
  for (size_t i = 0; i < layers.size(); ++i) {
    for (const auto& name : layers[i].param_names) {
      const auto it = where.find(name);
      if (it == where.end()) continue;  // frozen: not in the flat buffers, never gathered
      for (const Where& w : it->second) {
        const int64_t c = chunk(w.group);
        for (int q = 0; q < world; ++q) {
          const int64_t lo = std::max(w.offset, q * c) - q * c, hi = std::min(w.offset + w.numel, (q + 1) * c) - q * c;
          for (int64_t b = lo / per_rank[w.group]; lo < hi && b <= (hi - 1) / per_rank[w.group]; ++b) {
            first[w.group][b] = std::min(first[w.group][b], i);
            if (q != rank) reads[i].emplace_back(w.group, static_cast<size_t>(b));
          }
        }
      }
    }
  }
  std::vector<std::pair<size_t, size_t>> ids;  // (group, bucket), sorted into the issue order
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t b = 0; b < per_group[g].size(); ++b) ids.emplace_back(g, b);
  std::stable_sort(ids.begin(), ids.end(), [&](const auto& x, const auto& y) {
    return first[x.first][x.second] < first[y.first][y.second];
  });
  std::vector<std::vector<size_t>> position(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) position[g].resize(per_group[g].size());
  for (const auto& [g, b] : ids) {
    position[g][b] = order_.size();
    order_.push_back(per_group[g][b]);
  }
  for (const auto& r : reads) {
    size_t n = 0;
    for (const auto& [g, b] : r) n = std::max(n, position[g][b] + 1);
    needed_before_.push_back(n);
  }
  size_t bytes = 0;
  for (const Bucket& b : order_)
    bytes = std::max(bytes, static_cast<size_t>(b.numel * world) * c10::elementSize(precision_.storage(b.group).scalar_type()));
  for (size_t s = 0; s < kInFlight && world > 1 && bytes > 0; ++s)
    staging_.push_back(torch::empty({static_cast<int64_t>(bytes)}, torch::kUInt8));
}

OverlappedParamGather::~OverlappedParamGather() = default;

int64_t OverlappedParamGather::chunk(size_t group) const {
  return flat_.groups()[group].padded_numel / comm_.size();
}

uint64_t OverlappedParamGather::staging_bytes() const {
  return std::accumulate(staging_.begin(), staging_.end(), uint64_t{0},
                         [](uint64_t n, const torch::Tensor& t) { return n + static_cast<uint64_t>(t.numel()); });
}

void OverlappedParamGather::start() {
  if (comm_.size() == 1 || order_.empty()) return;
  finish();  // a previous gather no forward waited for
  issued_ = done_ = 0;
  started_ = true;
  while (issued_ < std::min(kInFlight, order_.size())) issue();
}

void OverlappedParamGather::finish() {
  if (!started_) return;
  land_until(order_.size());
  started_ = false;
}

void OverlappedParamGather::before_forward(size_t layer) {
  if (!started_) return;
  land_until(needed_before_.at(layer));
  // Buckets that already arrived free their staging buffer for the next one: keep the link busy.
  while (done_ < issued_ && work_[done_ % kInFlight].is_completed()) land();
  if (done_ == order_.size()) started_ = false;
}

void OverlappedParamGather::issue() {
  const int world = comm_.size(), rank = comm_.rank();
  const Bucket& b = order_[issued_];
  const torch::Tensor& storage = precision_.storage(b.group);
  const int64_t bytes = b.numel * world * static_cast<int64_t>(c10::elementSize(storage.scalar_type()));
  torch::Tensor wire = staging_[issued_ % kInFlight].narrow(0, 0, bytes).view(storage.scalar_type());
  torch::Tensor mine = wire.narrow(0, rank * b.numel, b.numel);
  mine.copy_(storage.narrow(0, rank * chunk(b.group) + b.offset, b.numel));
  work_[issued_ % kInFlight] = comm_.all_gather_async(nn::as_buffer(mine), nn::as_buffer(wire), "allgather_parameters");
  ++issued_;
}

void OverlappedParamGather::land() {
  DS_ASSERT(done_ < issued_, "a bucket is in flight");
  const int world = comm_.size(), rank = comm_.rank();
  const size_t slot = done_ % kInFlight;
  work_[slot].wait();
  const Bucket& b = order_[done_];
  const torch::Tensor& storage = precision_.storage(b.group);
  const int64_t bytes = b.numel * world * static_cast<int64_t>(c10::elementSize(storage.scalar_type()));
  torch::Tensor wire = staging_[slot].narrow(0, 0, bytes).view(storage.scalar_type());
  torch::NoGradGuard no_grad;
  for (int q = 0; q < world; ++q) {
    if (q == rank) continue;
    const int64_t at = q * chunk(b.group) + b.offset;
    storage.narrow(0, at, b.numel).copy_(wire.narrow(0, q * b.numel, b.numel));
    precision_.refresh_compute(b.group, at, b.numel);
  }
  ++done_;
  if (issued_ < order_.size()) issue();  // into the buffer just freed
}

void OverlappedParamGather::land_until(size_t n) {
  while (done_ < n) land();
}

}  // namespace ds::zero
