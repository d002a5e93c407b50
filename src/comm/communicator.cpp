// Argument validation, logging and the blocking wrappers shared by every backend.
#include "comm/communicator.h"

#include <chrono>
#include <string>

#include "comm/comms_logger.h"
#include "util/error.h"

namespace ds::comm {
namespace {

std::string elems(int64_t n, ElemType t) {
  return std::to_string(n) + " " + std::string(to_string(t)) + " element" + (n == 1 ? "" : "s");
}

void check_buffer(std::string_view op, const char* which, ConstBuffer b) {
  DS_CHECK(b.count >= 0, CommError,
           std::string(op) + ": " + which + " has a negative element count (" + std::to_string(b.count) + ")");
  DS_CHECK(b.count == 0 || b.data != nullptr, CommError,
           std::string(op) + ": " + which + " is null but has " + elems(b.count, b.type));
}

void check_same_type(std::string_view op, ConstBuffer in, ConstBuffer out) {
  DS_CHECK(in.type == out.type, CommError,
           std::string(op) + ": input is " + std::string(to_string(in.type)) + " but output is " +
               std::string(to_string(out.type)) + " (both must have the same element type)");
}

bool overlaps(ConstBuffer a, ConstBuffer b) {
  const char* a0 = static_cast<const char*>(a.data);
  const char* b0 = static_cast<const char*>(b.data);
  return a.count > 0 && b.count > 0 && a0 < b0 + b.bytes() && b0 < a0 + a.bytes();
}

// What the collective log counts as its payload: the buffer on this rank (an all-gather's output).
int64_t payload_bytes(const Collective& c) {
  return c.kind == OpKind::AllGather || c.kind == OpKind::Broadcast ? c.out.bytes() : c.in.bytes();
}

}  // namespace

std::string describe(const Collective& c) {
  std::string s = std::string(to_string(c.kind)) + " #" + std::to_string(c.seq);
  if (c.kind == OpKind::Barrier || c.kind == OpKind::Split) return s;
  s += " (";
  if (c.kind == OpKind::AllReduce || c.kind == OpKind::ReduceScatter || c.kind == OpKind::Reduce)
    s += std::string(to_string(c.op)) + ", ";
  if (c.kind == OpKind::Reduce || c.kind == OpKind::Broadcast) s += "root " + std::to_string(c.root) + ", ";
  return s + format_bytes(payload_bytes(c)) + " " + std::string(to_string(c.out.type)) + ")";
}

Communicator::~Communicator() = default;

Work Communicator::submit(Collective c, std::string_view tag) {
  const int64_t bytes = payload_bytes(c);
  c.seq = log_.begin(c.kind, bytes, c.out.type, c.op, tag, wire_bytes(c.kind, bytes, size()));
  c.tag = tag;
  return launch(c);
}

std::exception_ptr Communicator::run_logged(const Collective& c, const std::function<void()>& body) noexcept {
  log_.mark_running(c.seq);
  const auto started = std::chrono::steady_clock::now();
  std::exception_ptr error;
  try {
    body();
  } catch (const ds::Error&) {
    error = std::current_exception();
  } catch (const std::exception& e) {
    error = std::make_exception_ptr(CommError(describe(c) + ": " + e.what()));
  } catch (...) {
    error = std::make_exception_ptr(CommError(describe(c) + ": unknown error"));
  }
  log_.finish(c.seq, error == nullptr);
  if (error == nullptr && CommsLogger::global().enabled())
    CommsLogger::global().record(c.kind, c.tag, payload_bytes(c), size(),
                                 std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
  return error;
}

Work Communicator::all_reduce_async(Buffer buf, ReduceOp op, std::string_view tag) {
  return all_reduce_async(ConstBuffer(buf), buf, op, tag);
}

Work Communicator::all_reduce_async(ConstBuffer in, Buffer out, ReduceOp op, std::string_view tag) {
  check_buffer("all_reduce", "input", in);
  check_buffer("all_reduce", "output", out);
  check_same_type("all_reduce", in, out);
  DS_CHECK(in.count == out.count, CommError,
           "all_reduce: input has " + elems(in.count, in.type) + " but output has " +
               std::to_string(out.count) + " (they must match)");
  DS_CHECK(in.data == out.data || !overlaps(in, out), CommError,
           "all_reduce: input and output overlap without being the same buffer (use the in-place form)");
  return submit(Collective{OpKind::AllReduce, in, out, op, 0, 0, {}}, tag);
}

Work Communicator::reduce_scatter_async(ConstBuffer in, Buffer out, ReduceOp op, std::string_view tag) {
  check_buffer("reduce_scatter", "input", in);
  check_buffer("reduce_scatter", "output", out);
  check_same_type("reduce_scatter", in, out);
  const int64_t n = size();
  DS_CHECK(in.count == out.count * n, CommError,
           "reduce_scatter: input has " + elems(in.count, in.type) + " and output " +
               std::to_string(out.count) + "; the input must be output x world size = " +
               std::to_string(out.count) + " x " + std::to_string(n) + " = " +
               std::to_string(out.count * n) + " elements (pad the input to a multiple of the world size)");
  const ConstBuffer own = in.slice(out.count * rank(), out.count);
  DS_CHECK(!overlaps(in, out) || own.data == out.data, CommError,
           "reduce_scatter: output overlaps the input but is not its chunk " + std::to_string(rank()) +
               " (in place, the output must be exactly this rank's chunk)");
  return submit(Collective{OpKind::ReduceScatter, in, out, op, 0, 0, {}}, tag);
}

Work Communicator::all_gather_async(ConstBuffer in, Buffer out, std::string_view tag) {
  check_buffer("all_gather", "input", in);
  check_buffer("all_gather", "output", out);
  check_same_type("all_gather", in, out);
  const int64_t n = size();
  DS_CHECK(out.count == in.count * n, CommError,
           "all_gather: input has " + elems(in.count, in.type) + " and output " +
               std::to_string(out.count) + "; the output must be input x world size = " +
               std::to_string(in.count) + " x " + std::to_string(n) + " = " +
               std::to_string(in.count * n) + " elements");
  const ConstBuffer own = ConstBuffer(out).slice(in.count * rank(), in.count);
  DS_CHECK(!overlaps(in, out) || own.data == in.data, CommError,
           "all_gather: input overlaps the output but is not its chunk " + std::to_string(rank()) +
               " (in place, the input must be exactly this rank's chunk of the output)");
  return submit(Collective{OpKind::AllGather, in, out, ReduceOp::Sum, 0, 0, {}}, tag);
}

Work Communicator::broadcast_async(Buffer buf, int root, std::string_view tag) {
  check_buffer("broadcast", "buffer", buf);
  DS_CHECK(root >= 0 && root < size(), CommError,
           "broadcast: root " + std::to_string(root) + " is not a rank of this communicator (world size " +
               std::to_string(size()) + ")");
  return submit(Collective{OpKind::Broadcast, ConstBuffer(buf), buf, ReduceOp::Sum, root, 0, {}}, tag);
}

Work Communicator::reduce_async(Buffer buf, int root, ReduceOp op, std::string_view tag) {
  check_buffer("reduce", "buffer", buf);
  DS_CHECK(root >= 0 && root < size(), CommError,
           "reduce: root " + std::to_string(root) + " is not a rank of this communicator (world size " +
               std::to_string(size()) + ")");
  return submit(Collective{OpKind::Reduce, ConstBuffer(buf), buf, op, root, 0, {}}, tag);
}

Work Communicator::all_to_all_async(ConstBuffer in, Buffer out, std::string_view tag) {
  check_buffer("all_to_all", "input", in);
  check_buffer("all_to_all", "output", out);
  check_same_type("all_to_all", in, out);
  const int64_t n = size();
  DS_CHECK(in.count == out.count && in.count % n == 0, CommError,
           "all_to_all: input has " + elems(in.count, in.type) + " and output " + std::to_string(out.count) +
               "; both must hold the same number of elements, a multiple of the world size " +
               std::to_string(n));
  DS_CHECK(in.data == out.data || !overlaps(in, out), CommError,
           "all_to_all: input and output overlap without being the same buffer");
  return submit(Collective{OpKind::AllToAll, in, out, ReduceOp::Sum, 0, 0, {}}, tag);
}

Work Communicator::barrier_async(std::string_view tag) {
  return submit(Collective{OpKind::Barrier, {}, {}, ReduceOp::Sum, 0, 0, {}}, tag);
}

void Communicator::all_reduce(Buffer buf, ReduceOp op, std::string_view tag) {
  all_reduce_async(buf, op, tag).wait();
}
void Communicator::all_reduce(ConstBuffer in, Buffer out, ReduceOp op, std::string_view tag) {
  all_reduce_async(in, out, op, tag).wait();
}
void Communicator::reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op, std::string_view tag) {
  reduce_scatter_async(in, out, op, tag).wait();
}
void Communicator::all_gather(ConstBuffer in, Buffer out, std::string_view tag) {
  all_gather_async(in, out, tag).wait();
}
void Communicator::broadcast(Buffer buf, int root, std::string_view tag) {
  broadcast_async(buf, root, tag).wait();
}

void Communicator::reduce(Buffer buf, int root, ReduceOp op, std::string_view tag) {
  reduce_async(buf, root, op, tag).wait();
}
void Communicator::all_to_all(ConstBuffer in, Buffer out, std::string_view tag) {
  all_to_all_async(in, out, tag).wait();
}
void Communicator::barrier(std::string_view tag) { barrier_async(tag).wait(); }

std::unique_ptr<Communicator> Communicator::split(int color, int key, std::string_view tag) {
  DS_CHECK(color >= 0 || color == kNoGroup, CommError,
           "split: color " + std::to_string(color) + " is negative (use a color >= 0, or "
           "Communicator::kNoGroup (-1) for a rank that joins no group)");
  Collective c{OpKind::Split, {}, {}, ReduceOp::Sum, 0, 0, {}};
  c.seq = log_.begin(OpKind::Split, 0, ElemType::UInt8, ReduceOp::Sum, tag);
  return split_logged(c, color, key);
}

std::unique_ptr<Communicator> Communicator::split_logged(const Collective& c, int color, int key) {
  const Backend b = backend();
  std::exception_ptr error = run_logged(c, [&] {
    throw NotSupported(describe(c) + ": the " + std::string(to_string(b)) +
                       " backend cannot make sub-communicators yet (use the mpi backend)");
  });
  std::rethrow_exception(error);
}

}  // namespace ds::comm
