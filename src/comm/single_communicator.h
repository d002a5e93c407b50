// SingleCommunicator: world size 1, no MPI. Every collective is a copy (out-of-place forms) or a
// no-op (in place, barrier), run inline: the returned Work is already complete.
#pragma once

#include "comm/communicator.h"

namespace ds::comm {

class SingleCommunicator final : public Communicator {
 public:
  SingleCommunicator() = default;
  int rank() const noexcept override { return 0; }
  int size() const noexcept override { return 1; }
  Backend backend() const noexcept override { return Backend::Single; }

 protected:
  Work launch(const Collective& c) override;
};

}  // namespace ds::comm
