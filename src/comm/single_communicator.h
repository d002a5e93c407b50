// SingleCommunicator: world size 1, no MPI. Every collective is a copy (out-of-place forms) or a
// no-op (in place, barrier), run inline: the returned Work is already complete. split() gives
// another SingleCommunicator.
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
  // A world of one splits into itself: a new SingleCommunicator (nullptr for kNoGroup).
  std::unique_ptr<Communicator> split_logged(const Collective& c, int color, int key) override;
};

}  // namespace ds::comm
