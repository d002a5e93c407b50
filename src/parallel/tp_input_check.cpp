#include "parallel/tp_input_check.h"

#include <fmt/format.h>

#include "nn/tensor_buffer.h"
#include "util/crc32c.h"
#include "util/error.h"

namespace ds::parallel {
namespace {

// The shape and the bytes of one argument as one number (undefined: 0).
int64_t fingerprint(const torch::Tensor& t) {
  if (!t.defined()) return 0;
  const torch::Tensor c = t.detach().to(torch::kCPU).contiguous();
  uint32_t crc = crc32c(c.sizes().data(), c.sizes().size() * sizeof(int64_t));
  const auto type = static_cast<int32_t>(c.scalar_type());
  crc = crc32c(&type, sizeof(type), crc);
  crc = crc32c(c.data_ptr(), c.numel() * c.element_size(), crc);
  return (int64_t{c.numel()} << 32) | crc;
}

}  // namespace

void check_same_inputs(comm::Communicator& tp, const std::vector<torch::Tensor>& inputs, const GroupKind& kind) {
  if (tp.size() == 1 || inputs.empty()) return;
  const size_t n = inputs.size();
  std::vector<int64_t> high(n), low(n);
  for (size_t i = 0; i < n; ++i) high[i] = low[i] = fingerprint(inputs[i]);
  tp.all_reduce(comm::Buffer(high.data(), n), comm::ReduceOp::Max, "tp_input_check");
  tp.all_reduce(comm::Buffer(low.data(), n), comm::ReduceOp::Min, "tp_input_check");
  for (size_t i = 0; i < n; ++i) {
    if (high[i] == low[i]) continue;
    throw Error(fmt::format(
        "{} {}: forward argument {} differs across the {} group (this rank is {} of the group): every rank of a "
        "{} group must see the same batch; shard the data by data-parallel rank (engine.topology().data().rank() "
        "of data().size()), not by world rank",
        kind.key, tp.size(), i, kind.name, tp.rank(), kind.name));
  }
}

}  // namespace ds::parallel
