// ds::comm::Communicator: the collectives ZeRO and the engine need, over contiguous raw buffers
// (comm/types.h), with blocking and async (Work-returning) forms. Backends: SingleCommunicator
// (world 1), MpiCommunicator (Open MPI), NcclCommunicator (DS_WITH_NCCL builds). The public
// calls validate their arguments (throwing ds::CommError that names the sizes), record the
// collective in the CollectiveLog, and hand it to the backend.
//
// Ordering contract (as with MPI and NCCL): every rank issues the same collectives in the same
// order. A backend runs one communicator's collectives one at a time in issue order, so async
// calls never overtake each other or a later blocking call.
#pragma once

#include <exception>
#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "comm/collective_log.h"
#include "comm/types.h"
#include "comm/work.h"

namespace ds::comm {

// One validated collective as a backend receives it.
struct Collective {
  OpKind kind = OpKind::Barrier;
  ConstBuffer in;   // all_reduce/reduce_scatter/all_gather/all_to_all input; broadcast: unused
  Buffer out;       // result (broadcast: the buffer itself)
  ReduceOp op = ReduceOp::Sum;
  int root = 0;     // broadcast
  uint64_t seq = 0;
  std::string tag;  // the caller's label, as in the collective log
};

class Communicator {
 public:
  virtual ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  virtual int rank() const noexcept = 0;
  virtual int size() const noexcept = 0;
  virtual Backend backend() const noexcept = 0;

  // --- async: start the collective, return its handle. Buffers must stay alive until wait(). ---
  // In place: buf = op over ranks of buf. Any count.
  Work all_reduce_async(Buffer buf, ReduceOp op = ReduceOp::Sum, std::string_view tag = {});
  // out = op over ranks of in (same count and type; out may equal in). Any count.
  Work all_reduce_async(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum,
                        std::string_view tag = {});
  // in holds size() equal chunks of out.count elements; out = op over ranks of chunk rank().
  // out may be in's own chunk rank() (in place).
  Work reduce_scatter_async(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum,
                            std::string_view tag = {});
  // out = the concatenation over ranks of in; out.count = in.count * size(). in may be out's
  // chunk rank() (in place).
  Work all_gather_async(ConstBuffer in, Buffer out, std::string_view tag = {});
  // buf on every rank = buf on root. Any count.
  Work broadcast_async(Buffer buf, int root, std::string_view tag = {});
  // In place at root: buf on root = op over ranks of buf; the others' buf is left as it was. Any
  // count. What a gradient owned by one rank needs (ZeRO-2's reduce to the partition's owner).
  Work reduce_async(Buffer buf, int root, ReduceOp op = ReduceOp::Sum, std::string_view tag = {});
  // in and out hold size() equal chunks; out chunk j = chunk rank() of rank j's in.
  Work all_to_all_async(ConstBuffer in, Buffer out, std::string_view tag = {});
  Work barrier_async(std::string_view tag = {});

  // --- blocking: the same calls, waited. ---
  void all_reduce(Buffer buf, ReduceOp op = ReduceOp::Sum, std::string_view tag = {});
  void all_reduce(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum, std::string_view tag = {});
  void reduce_scatter(ConstBuffer in, Buffer out, ReduceOp op = ReduceOp::Sum,
                      std::string_view tag = {});
  void all_gather(ConstBuffer in, Buffer out, std::string_view tag = {});
  void broadcast(Buffer buf, int root, std::string_view tag = {});
  void reduce(Buffer buf, int root, ReduceOp op = ReduceOp::Sum, std::string_view tag = {});
  void all_to_all(ConstBuffer in, Buffer out, std::string_view tag = {});
  void barrier(std::string_view tag = {});

  // --- sub-communicators ---
  // The color of a rank that joins no group in split().
  static constexpr int kNoGroup = -1;
  // Collective over this communicator, issued in order with its other collectives (every rank
  // calls it at the same point), like MPI_Comm_split: the ranks that pass the same color >= 0 form
  // one new communicator, ranked by key (ties by their rank here); a rank that passes kNoGroup gets
  // nullptr. The new communicator is independent of this one: its own sequence numbers, log, worker
  // and (MPI) context, so its collectives never match this communicator's or a sibling's, and it may
  // outlive this one. Throws ds::CommError for a color below -1, ds::NotSupported on a backend
  // without it (nccl, for now).
  std::unique_ptr<Communicator> split(int color, int key, std::string_view tag = {});

  // The last CollectiveLog::kCapacity collectives, oldest first.
  std::vector<CollectiveRecord> last_collectives() const { return log_.last(); }
  const CollectiveLog& collective_log() const noexcept { return log_; }

 protected:
  Communicator() = default;

  // Runs or queues `c` (validated, logged as Queued, c.seq set). The backend marks it running
  // and finished in log_ (begin_run / end_run) and completes the returned Work.
  virtual Work launch(const Collective& c) = 0;

  // The backend's part of split(): runs the split `c` (validated, logged as Queued, c.seq set) and
  // returns this rank's new communicator (nullptr for kNoGroup). The default throws NotSupported.
  virtual std::unique_ptr<Communicator> split_logged(const Collective& c, int color, int key);

  // Runs `body` as collective `c`: marks it running, then done or failed; converts any error into
  // the exception_ptr the Work reports (a ds::CommError naming the collective).
  std::exception_ptr run_logged(const Collective& c, const std::function<void()>& body) noexcept;

  CollectiveLog log_;

 private:
  Work submit(Collective c, std::string_view tag);
};

// "all_reduce #12 (sum, 64 MiB fp32)": how errors name a collective.
std::string describe(const Collective& c);

}  // namespace ds::comm
