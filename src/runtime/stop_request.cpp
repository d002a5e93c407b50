// Agreement on a stop request (see stop_request.h).
#include "runtime/stop_request.h"

#include <algorithm>

#include "util/stop_signal.h"

namespace ds {

void StopRequest::agree(comm::Communicator& comm) {
  const int sig = stop_signal_received();
  int32_t mine[2] = {requested_ || sig != 0 ? 1 : 0, sig};
  // Every rank takes part every boundary, so no rank can stop a step before the others.
  if (comm.size() > 1) comm.all_reduce(comm::Buffer(mine, 2), comm::ReduceOp::Max, "stop_request");
  agreed_ = agreed_ || mine[0] != 0;
  signal_ = std::max(signal_, static_cast<int>(mine[1]));
}

}  // namespace ds
