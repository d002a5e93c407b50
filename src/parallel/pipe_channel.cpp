#include "parallel/pipe_channel.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "nn/tensor_buffer.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

// Per tensor [ndim, scalar type, dims...]: what the receiver allocates from.
constexpr int kMetaLen = 10;
// The first exchange: [number of tensors, then one meta each] for the activation and its side tensors.
constexpr int kMessageLen = 1 + (1 + PipeChannels::kMaxSideTensors) * kMetaLen;

void append_meta(std::vector<int64_t>& m, const torch::Tensor& t) {
  DS_CHECK(t.dim() <= kMetaLen - 2, NotSupported,
           fmt::format("pipeline: an activation of {} dimensions (at most {} cross a stage)", t.dim(), kMetaLen - 2));
  const size_t at = size_t(1 + m[0] * kMetaLen);
  m[at] = t.dim();
  m[at + 1] = int64_t(t.scalar_type());
  for (int64_t d = 0; d < t.dim(); ++d) m[at + 2 + size_t(d)] = t.size(d);
  ++m[0];
}

std::vector<int64_t> meta_of(const torch::Tensor& x, const std::vector<torch::Tensor>& side) {
  DS_CHECK(side.size() <= size_t(PipeChannels::kMaxSideTensors), NotSupported,
           fmt::format("pipeline: {} side tensors with an activation (at most {})", side.size(),
                       PipeChannels::kMaxSideTensors));
  std::vector<int64_t> m(kMessageLen, 0);
  append_meta(m, x);
  for (const auto& t : side) {
    DS_CHECK(t.defined(), Error, "pipeline: an undefined side tensor");
    append_meta(m, t);
  }
  return m;
}

// Tensor k's shape and dtype in a message.
std::vector<int64_t> sizes_at(const std::vector<int64_t>& m, int64_t k) {
  const auto at = m.begin() + 1 + k * kMetaLen;
  return std::vector<int64_t>(at + 2, at + 2 + at[0]);
}
c10::ScalarType dtype_at(const std::vector<int64_t>& m, int64_t k) { return c10::ScalarType(m[size_t(2 + k * kMetaLen)]); }

// Bytes cross as bytes: a bool tensor (a mask) travels as its uint8 view.
comm::Buffer wire_buffer(const torch::Tensor& t) {
  return nn::as_buffer(t.scalar_type() == torch::kBool ? t.view(torch::kUInt8) : t);
}

std::string describe_meta(const std::vector<int64_t>& m) {
  std::string s;
  for (int64_t k = 0; k < m[0]; ++k)
    s += fmt::format("{}{} {}", k == 0 ? "" : (k == 1 ? " with side " : ", "), sizes_at(m, k),
                     c10::toString(dtype_at(m, k)));
  return s;
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
  comm::Work w = c.broadcast_async(wire_buffer(keep), c.rank(), what);
  pending_.push_back({std::move(w), std::move(keep)});
}

void PipeChannels::send_activation(const torch::Tensor& out, const std::vector<torch::Tensor>& side,
                                   const std::string& what) {
  DS_CHECK(next_ != nullptr, Error, "pipeline: " + what + " on the last stage");
  std::vector<int64_t> meta = meta_of(out, side);
  if (!sent_meta_) {
    sent_meta_ = meta;
    next_->broadcast(comm::Buffer(sent_meta_->data(), kMessageLen), next_->rank(), what + " meta");
  } else if (*sent_meta_ != meta) {
    throw Error(fmt::format("pipeline: stage {} produced an activation of {} after {}; every micro-batch must give "
                            "each stage's output the same shape and dtype (pad the batches to one length)",
                            stage_, describe_meta(meta), describe_meta(*sent_meta_)));
  }
  send(*next_, out, what);
  for (const auto& t : side) send(*next_, t, what + " side");
}

PipeActivation PipeChannels::recv_activation(const std::string& what) {
  DS_CHECK(prev_ != nullptr, Error, "pipeline: " + what + " on the first stage");
  if (!recv_meta_) {
    recv_meta_ = std::vector<int64_t>(kMessageLen, 0);
    prev_->broadcast(comm::Buffer(recv_meta_->data(), kMessageLen), 0, what + " meta");
  }
  const auto& m = *recv_meta_;
  auto recv = [&](int64_t k, const std::string& name) {
    torch::Tensor t = torch::empty(sizes_at(m, k), torch::TensorOptions().dtype(dtype_at(m, k)));
    prev_->broadcast(wire_buffer(t), 0, name);
    return t;
  };
  PipeActivation a{recv(0, what), {}};
  for (int64_t k = 1; k < m[0]; ++k) a.side.push_back(recv(k, what + " side"));
  return a;
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

void PipeChannels::reset_shapes() {
  sent_meta_.reset();
  recv_meta_.reset();
}

}  // namespace ds::parallel
