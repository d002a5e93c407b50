#include "parallel/pipe_channel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/tensor_buffer.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

// [ndim, scalar type, dims...]: what the receiver allocates from.
constexpr int kMetaLen = 10;

std::vector<int64_t> meta_of(const torch::Tensor& t) {
  DS_CHECK(t.dim() <= kMetaLen - 2, NotSupported,
           fmt::format("pipeline: an activation of {} dimensions (at most {} cross a stage)", t.dim(), kMetaLen - 2));
  std::vector<int64_t> m(kMetaLen, 0);
  m[0] = t.dim();
  m[1] = int64_t(t.scalar_type());
  for (int64_t d = 0; d < t.dim(); ++d) m[size_t(d) + 2] = t.size(d);
  return m;
}

std::string describe_meta(const std::vector<int64_t>& m) {
  return fmt::format("{} {}", std::vector<int64_t>(m.begin() + 2, m.begin() + 2 + m[0]),
                     c10::toString(c10::ScalarType(m[1])));
}

}  // namespace

PipeChannels::PipeChannels(const Topology& topology) : stage_(topology.coords()[0]), stages_(topology.shape().pipe) {
  comm::Communicator& world = topology.world();
  const int per_stage = topology.world_size() / stages_;
  const int other = topology.rank() % per_stage;  // the rank's data/sequence/model position
  // Pair (s, s+1) for even s, then for odd s; colour = pair x position, key = stage (lower first).
  for (int parity = 0; parity < 2; ++parity) {
    const int low = (stage_ % 2 == parity) ? stage_ : stage_ - 1;  // the pair's lower stage, if any
    const bool in_pair = low >= 0 && low + 1 < stages_;
    const int color = in_pair ? (low / 2) * per_stage + other : comm::Communicator::kNoGroup;
    auto pair = world.split(color, stage_, parity == 0 ? "pipe_pairs_even" : "pipe_pairs_odd");
    if (!in_pair) continue;
    (low == stage_ ? next_ : prev_) = std::move(pair);
  }
}

PipeChannels::~PipeChannels() {
  try {
    drain();
  } catch (...) {  // a failed send was reported by whoever ended the step early
  }
}

void PipeChannels::send(comm::Communicator& c, const torch::Tensor& t, const std::string& what) {
  torch::Tensor keep = t.detach().contiguous();
  comm::Work w = c.broadcast_async(nn::as_buffer(keep), c.rank(), what);
  pending_.push_back({std::move(w), std::move(keep)});
}

void PipeChannels::send_activation(const torch::Tensor& out, const std::string& what) {
  DS_CHECK(next_ != nullptr, Error, "pipeline: " + what + " on the last stage");
  std::vector<int64_t> meta = meta_of(out);
  if (!sent_meta_) {
    sent_meta_ = meta;
    next_->broadcast(comm::Buffer(sent_meta_->data(), kMetaLen), next_->rank(), what + " meta");
  } else if (*sent_meta_ != meta) {
    throw Error(fmt::format("pipeline: stage {} produced an activation of {} after {}; every micro-batch must give "
                            "each stage's output the same shape and dtype (pad the batches to one length)",
                            stage_, describe_meta(meta), describe_meta(*sent_meta_)));
  }
  send(*next_, out, what);
}

torch::Tensor PipeChannels::recv_activation(const std::string& what) {
  DS_CHECK(prev_ != nullptr, Error, "pipeline: " + what + " on the first stage");
  if (!recv_meta_) {
    recv_meta_ = std::vector<int64_t>(kMetaLen, 0);
    prev_->broadcast(comm::Buffer(recv_meta_->data(), kMetaLen), 0, what + " meta");
  }
  const auto& m = *recv_meta_;
  torch::Tensor t = torch::empty(std::vector<int64_t>(m.begin() + 2, m.begin() + 2 + m[0]),
                                 torch::TensorOptions().dtype(c10::ScalarType(m[1])));
  prev_->broadcast(nn::as_buffer(t), 0, what);
  return t;
}

void PipeChannels::send_grad(const torch::Tensor& grad, const std::string& what) {
  DS_CHECK(prev_ != nullptr, Error, "pipeline: " + what + " on the first stage");
  send(*prev_, grad, what);
}

torch::Tensor PipeChannels::recv_grad(const torch::Tensor& like, const std::string& what) {
  DS_CHECK(next_ != nullptr, Error, "pipeline: " + what + " on the last stage");
  torch::Tensor g = torch::empty(like.sizes(), like.options().requires_grad(false));
  next_->broadcast(nn::as_buffer(g), 1, what);
  return g;
}

void PipeChannels::drain() {
  std::vector<Pending> pending = std::move(pending_);
  pending_.clear();
  for (auto& p : pending) p.work.wait();
}

}  // namespace ds::parallel
