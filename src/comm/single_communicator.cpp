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
      case OpKind::Barrier:
        break;
    }
  });
  return Work::completed(c.seq, std::move(error));
}

}  // namespace ds::comm
