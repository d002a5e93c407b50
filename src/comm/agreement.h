// Agreement across ranks: every rank learns whether any of them failed, and every rank's error then
// names the first failing rank's cause, so a multi-rank operation (a checkpoint save, a load) fails
// everywhere or nowhere.
#pragma once

#include <exception>
#include <string>
#include <vector>

#include "comm/communicator.h"

namespace ds::comm {

// Collective. Returns when no rank passed an error. Otherwise a failing rank rethrows its own error
// and every other rank throws ds::IoError("<message of the lowest failing rank> (on rank N)").
void agree_or_throw(Communicator& comm, std::exception_ptr error, const std::string& what);

// Collective: `root`'s `text` on every rank (the others' `text` is ignored).
std::string broadcast_text(Communicator& comm, const std::string& text, int root, const char* what);

// Collective: every rank's `text`, in rank order, on every rank.
std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text, const char* what);

}  // namespace ds::comm
