#include "parallel/ulysses.h"

#include <fmt/format.h>

#include "nn/tensor_buffer.h"
#include "parallel/autograd_group.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void check_divides(int64_t n, comm::Communicator& sp, const char* what) {
  if (n % sp.size() == 0) return;
  throw ConfigError("sequence_parallel_size",
                    fmt::format("{} {} does not split over a sequence-parallel group of {} ranks (Ulysses gives each "
                                "rank 1/{} of them); choose a sequence_parallel_size that divides it",
                                what, n, sp.size(), sp.size()));
}

// One all-to-all of `blocks` [N, ...]: block j goes to rank j; the result's block j came from rank j.
torch::Tensor exchange(const torch::Tensor& blocks, comm::Communicator& sp) {
  const torch::Tensor in = blocks.contiguous();
  torch::Tensor out = torch::empty_like(in);
  sp.all_to_all(nn::as_buffer(in), nn::as_buffer(out), "ulysses_all_to_all");
  return out;
}

// [B,H,Tl,D] → [B,H/N,N·Tl,D]: send head group j to rank j, receive rank j's tokens as block j.
torch::Tensor seq_to_heads(const torch::Tensor& x, comm::Communicator& sp) {
  const int64_t n = sp.size(), b = x.size(0), h = x.size(1), tl = x.size(2), d = x.size(3);
  check_divides(h, sp, "the attention's head count");
  auto blocks = x.reshape({b, n, h / n, tl, d}).permute({1, 0, 2, 3, 4});        // [N,B,H/N,Tl,D]
  auto got = exchange(blocks, sp);                                                 // [N(tokens),B,H/N,Tl,D]
  return got.permute({1, 2, 0, 3, 4}).reshape({b, h / n, n * tl, d});             // tokens in rank order
}

// [B,Hl,N·Tl,D] → [B,N·Hl,Tl,D]: send token block j to rank j, receive rank j's heads as block j.
torch::Tensor heads_to_seq(const torch::Tensor& x, comm::Communicator& sp) {
  const int64_t n = sp.size(), b = x.size(0), hl = x.size(1), t = x.size(2), d = x.size(3);
  check_divides(t, sp, "the sequence length");
  auto blocks = x.reshape({b, hl, n, t / n, d}).permute({2, 0, 1, 3, 4});        // [N,B,Hl,Tl,D]
  auto got = exchange(blocks, sp);                                                 // [N(heads),B,Hl,Tl,D]
  return got.permute({1, 0, 2, 3, 4}).reshape({b, n * hl, t / n, d});             // heads in rank order
}

struct SequenceToHeads : torch::autograd::Function<SequenceToHeads> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, comm::Communicator* sp) {
    save_group(ctx, *sp);
    return seq_to_heads(x, *sp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {heads_to_seq(g[0], saved_group(ctx)), torch::Tensor()};
  }
};

struct HeadsToSequence : torch::autograd::Function<HeadsToSequence> {
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& x, comm::Communicator* sp) {
    save_group(ctx, *sp);
    return heads_to_seq(x, *sp);
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {seq_to_heads(g[0], saved_group(ctx)), torch::Tensor()};
  }
};

void check_heads_layout(const torch::Tensor& x, const char* who) {
  DS_CHECK(x.defined() && x.dim() == 4, Error,
           fmt::format("{}: expected [batch, heads, tokens, head_dim], got a tensor of {} dimensions", who,
                       x.defined() ? x.dim() : 0));
}

}  // namespace

torch::Tensor shard_sequence(const torch::Tensor& x, comm::Communicator& sp, int64_t dim) {
  if (sp.size() == 1) return x;
  const int64_t t = x.size(dim);
  check_divides(t, sp, "the sequence length");
  const int64_t local = t / sp.size();
  return x.narrow(dim, sp.rank() * local, local);
}

torch::Tensor sequence_positions(int64_t t, comm::Communicator& sp, torch::Device device) {
  check_divides(t, sp, "the sequence length");
  const int64_t local = t / sp.size(), first = sp.rank() * local;
  return torch::arange(first, first + local, torch::TensorOptions().dtype(torch::kLong).device(device));
}

torch::Tensor sequence_to_heads(const torch::Tensor& x, comm::Communicator& sp) {
  check_heads_layout(x, "sequence_to_heads");
  return sp.size() == 1 ? x : SequenceToHeads::apply(x, &sp);
}

torch::Tensor heads_to_sequence(const torch::Tensor& x, comm::Communicator& sp) {
  check_heads_layout(x, "heads_to_sequence");
  return sp.size() == 1 ? x : HeadsToSequence::apply(x, &sp);
}

torch::Tensor sequence_parallel_mean(const torch::Tensor& local_sum, int64_t local_count, comm::Communicator& sp) {
  if (sp.size() == 1) return local_sum / static_cast<double>(local_count);
  // One all-reduce of (sum, count) in double: the value every rank reports.
  torch::Tensor totals = torch::tensor({local_sum.detach().to(torch::kDouble).item<double>(), double(local_count)},
                                       torch::TensorOptions().dtype(torch::kDouble));
  sp.all_reduce(nn::as_buffer(totals), comm::ReduceOp::Sum, "sequence_parallel_loss");
  const double sum = totals[0].item<double>(), count = totals[1].item<double>();
  // N·local_sum / count carries the gradient; the detached difference makes the value the group's mean.
  torch::Tensor scaled = local_sum * (static_cast<double>(sp.size()) / count);
  return scaled + (sum / count - scaled.detach());
}

}  // namespace ds::parallel
