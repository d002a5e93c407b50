// The world-1 backend: the result of every collective over one rank is its own input.
#include "comm/single_communicator.h"

#include "comm/kernels.h"

namespace ds::comm {

Work SingleCommunicator::launch(const Collective& c) {
  auto error = run_logged(c, [&] {
    switch (c.kind) {
      case OpKind::AllReduce:
      case OpKind::ReduceScatter:
      case OpKind::AllGather:
      case OpKind::AllToAll:
        copy_elements(c.out, c.in);  // a no-op when in place
        break;
      case OpKind::Broadcast:  // root is 0 (validated)
      case OpKind::Reduce:
      case OpKind::Barrier:
      case OpKind::Split:      // never launched: split_logged handles it
        break;
    }
  });
  return Work::completed(c.seq, std::move(error));
}

std::unique_ptr<Communicator> SingleCommunicator::split_logged(const Collective& c, int color, int key) {
  if (auto error = run_logged(c, [] {})) std::rethrow_exception(error);
  if (color == kNoGroup) return nullptr;
  return std::make_unique<SingleCommunicator>();
}

}  // namespace ds::comm
