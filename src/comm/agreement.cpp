#include "comm/agreement.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>

#include "util/error.h"

namespace ds::comm {

void agree_or_throw(Communicator& comm, std::exception_ptr error, const std::string& what) {
  const int world = comm.size();
  if (world == 1) {
    if (error) std::rethrow_exception(error);
    return;
  }
  // The lowest failing rank's message reaches every rank, so each one's error names the cause.
  int32_t failed = error ? comm.rank() : world;
  comm.all_reduce(Buffer(&failed, 1), ReduceOp::Min, what);
  if (failed == world) return;
  std::string message;
  if (comm.rank() == failed) {
    try {
      std::rethrow_exception(error);
    } catch (const std::exception& e) {
      message = e.what();
    } catch (...) {
      message = "unknown error";
    }
  }
  int64_t length = static_cast<int64_t>(message.size());
  comm.broadcast(Buffer(&length, 1), failed);
  message.resize(static_cast<size_t>(length));
  comm.broadcast(Buffer(reinterpret_cast<uint8_t*>(message.data()), length), failed);
  if (error) std::rethrow_exception(error);
  throw IoError(fmt::format("{} (on rank {})", message, failed));
}

std::string broadcast_text(Communicator& comm, const std::string& text, int root, const char* what) {
  if (comm.size() == 1) return text;
  const bool mine = comm.rank() == root;
  int64_t length = mine ? static_cast<int64_t>(text.size()) : 0;
  comm.broadcast(Buffer(&length, 1), root, what);
  std::string out = mine ? text : std::string(static_cast<size_t>(length), '\0');
  if (length > 0) comm.broadcast(Buffer(reinterpret_cast<uint8_t*>(out.data()), length), root, what);
  return out;
}

std::vector<std::string> all_gather_text(Communicator& comm, const std::string& text, const char* what) {
  const int world = comm.size();
  if (world == 1) return {text};
  // The lengths first, then the texts padded to the longest.
  int64_t mine = static_cast<int64_t>(text.size());
  std::vector<int64_t> lengths(size_t(world), 0);
  comm.all_gather(ConstBuffer(&mine, 1), Buffer(lengths.data(), world), what);
  const int64_t longest = *std::max_element(lengths.begin(), lengths.end());
  std::vector<uint8_t> padded(size_t(longest), 0), all(size_t(longest) * size_t(world), 0);
  std::copy(text.begin(), text.end(), padded.begin());
  comm.all_gather(ConstBuffer(padded.data(), longest), Buffer(all.data(), longest * world), what);
  std::vector<std::string> out;
  for (int r = 0; r < world; ++r) {
    const auto* at = reinterpret_cast<const char*>(all.data()) + size_t(r) * size_t(longest);
    out.emplace_back(at, size_t(lengths[size_t(r)]));
  }
  return out;
}

}  // namespace ds::comm
