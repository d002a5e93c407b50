// A training run's stop request, agreed across ranks (issue 22, item 6). Each rank may ask to stop
// on its own — engine.request_stop(), or a SIGTERM/SIGINT caught by ds::install_stop_signal_handlers()
// — but a checkpoint needs every rank, so the request only takes effect at an accumulation boundary,
// where every rank calls agree() and learns whether any rank asked (one MAX all-reduce of two ints).
#pragma once

#include "comm/communicator.h"

namespace ds {

class StopRequest {
 public:
  void request() { requested_ = true; }
  // At an accumulation boundary, on every rank: true from then on when any rank has asked.
  void agree(comm::Communicator& comm);
  bool agreed() const { return agreed_; }
  // The stop signal behind the request on any rank (SIGTERM, SIGINT), 0 for request() alone.
  int signal() const { return signal_; }

 private:
  bool requested_ = false;
  bool agreed_ = false;
  int signal_ = 0;
};

}  // namespace ds
