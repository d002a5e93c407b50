// Native and ring implementations of the collectives over MPI (see mpi_collectives.h).
#include "comm/mpi_collectives.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <new>

#include "comm/kernels.h"
#include "util/error.h"

namespace ds::comm {
namespace {

constexpr int kTag = 7317;                       // ring point-to-point traffic on our own comm
constexpr int64_t kMaxMessage = int64_t(1) << 30;  // bytes per MPI call (counts are int)

int mod(int a, int n) { return ((a % n) + n) % n; }
char* ptr(void* p, int64_t elems, std::size_t es) { return static_cast<char*>(p) + elems * int64_t(es); }
const char* ptr(const void* p, int64_t elems, std::size_t es) {
  return static_cast<const char*>(p) + elems * int64_t(es);
}

struct Ring {
  const MpiRunContext& ctx;
  const Collective& c;
  int right() const { return (ctx.rank + 1) % ctx.size; }
  int left() const { return (ctx.rank - 1 + ctx.size) % ctx.size; }
  // Sends `send_bytes` to the right neighbour while receiving `recv_bytes` from the left one.
  void sendrecv(const void* send, int64_t send_bytes, void* recv, int64_t recv_bytes) const {
    const std::string what = describe(c) + ": the ring's exchange (did the ranks pass different sizes?)";
    if (ctx.wait == MpiWait::Spin) {
      check_mpi(MPI_Sendrecv(send, int(send_bytes), MPI_BYTE, right(), kTag, recv, int(recv_bytes), MPI_BYTE,
                             left(), kTag, ctx.comm, MPI_STATUS_IGNORE),
                what);
      return;
    }
    MPI_Request r[2];
    check_mpi(MPI_Irecv(recv, int(recv_bytes), MPI_BYTE, left(), kTag, ctx.comm, &r[0]), what);
    check_mpi(MPI_Isend(send, int(send_bytes), MPI_BYTE, right(), kTag, ctx.comm, &r[1]), what);
    wait_all(r, ctx.wait, what);
  }
  int64_t slice_elems(std::size_t es) const {
    return std::max<int64_t>(1, std::min(ctx.ring_slice_bytes, kMaxMessage) / int64_t(es));
  }
};

// Chunk c of `count` elements split over n ranks: [count*c/n, count*(c+1)/n).
struct Chunks {
  int64_t count;
  int n;
  int64_t begin(int c) const { return count * c / n; }
  int64_t len(int c) const { return begin(c + 1) - begin(c); }
};

// all_reduce, per slice round: a ring reduce-scatter (step s sends chunk r-s-1, receives chunk r-s-2
// and adds this rank's input to it, leaving chunk r complete), then a ring all-gather of the complete
// chunks. Step 0 sends straight from the input and every sum lands in `out`, so an out-of-place call
// needs no copy: each chunk of out is written by the reduce-scatter or received by the all-gather.
void ring_all_reduce(const MpiRunContext& ctx, const Collective& c) {
  const std::size_t es = elem_size(c.out.type);
  const int n = ctx.size, r = ctx.rank;
  const Ring ring{ctx, c};
  const Chunks ch{c.out.count, n};
  const int64_t S = ring.slice_elems(es);
  const int64_t max_len = (c.out.count + n - 1) / n;
  void* tmp = ctx.scratch.get(0, size_t(std::min(S, max_len)) * es);
  auto slice = [&](int chunk, int64_t j) {
    const int64_t len = std::clamp<int64_t>(ch.len(chunk) - j * S, 0, S);
    return std::pair<int64_t, int64_t>(ch.begin(chunk) + j * S, len);
  };
  for (int64_t j = 0; j * S < max_len; ++j) {
    for (int s = 0; s < n - 1; ++s) {
      const auto [so, sl] = slice(mod(r - s - 1, n), j);
      const auto [ro, rl] = slice(mod(r - s - 2, n), j);
      const void* send = s == 0 ? ptr(c.in.data, so, es) : ptr(c.out.data, so, es);
      ring.sendrecv(send, sl * int64_t(es), tmp, rl * int64_t(es));
      reduce_elements(ptr(c.out.data, ro, es), tmp, ptr(c.in.data, ro, es), rl, c.out.type, c.op);
    }
    for (int s = 0; s < n - 1; ++s) {
      const auto [so, sl] = slice(mod(r - s, n), j);
      const auto [ro, rl] = slice(mod(r - s - 1, n), j);
      ring.sendrecv(ptr(c.out.data, so, es), sl * int64_t(es), ptr(c.out.data, ro, es), rl * int64_t(es));
    }
  }
}

// reduce_scatter: like the first half of ring_all_reduce, but the input is read-only, so the partial
// sums travel through a scratch accumulator and the last step writes this rank's chunk into out.
void ring_reduce_scatter(const MpiRunContext& ctx, const Collective& c) {
  const std::size_t es = elem_size(c.out.type);
  const int n = ctx.size, r = ctx.rank;
  const int64_t chunk = c.out.count;
  const Ring ring{ctx, c};
  const int64_t S = ring.slice_elems(es);
  const std::size_t scratch_bytes = size_t(std::min(S, chunk)) * es;
  void* tmp = ctx.scratch.get(0, scratch_bytes);
  void* acc = n > 2 ? ctx.scratch.get(1, scratch_bytes) : nullptr;
  for (int64_t j = 0; j * S < chunk; ++j) {
    const int64_t off = j * S, len = std::min(S, chunk - off);
    for (int s = 0; s < n - 1; ++s) {
      const int cs = mod(r - s - 1, n), cr = mod(r - s - 2, n);
      const void* send = s == 0 ? ptr(c.in.data, cs * chunk + off, es) : acc;
      ring.sendrecv(send, len * int64_t(es), tmp, len * int64_t(es));
      void* dst = s == n - 2 ? ptr(c.out.data, off, es) : acc;  // the send buffer is free again
      reduce_elements(dst, tmp, ptr(c.in.data, cr * chunk + off, es), len, c.out.type, c.op);
    }
  }
}

// all_gather: put this rank's chunk in place, then pass chunks around the ring straight into out.
void ring_all_gather(const MpiRunContext& ctx, const Collective& c) {
  const std::size_t es = elem_size(c.out.type);
  const int n = ctx.size, r = ctx.rank;
  const int64_t chunk = c.in.count;
  copy_elements(c.out.slice(chunk * r, chunk), c.in);
  const Ring ring{ctx, c};
  const int64_t S = std::max<int64_t>(1, kMaxMessage / int64_t(es));
  for (int64_t off = 0; off < chunk; off += S) {
    const int64_t len = std::min(S, chunk - off);
    for (int s = 0; s < n - 1; ++s) {
      const int cs = mod(r - s, n), cr = mod(r - s - 1, n);
      ring.sendrecv(ptr(c.out.data, cs * chunk + off, es), len * int64_t(es),
                    ptr(c.out.data, cr * chunk + off, es), len * int64_t(es));
    }
  }
}

// reduce to the root along the chain root+1 -> root+2 -> ... -> root, slice by slice: each rank
// receives the partial sum of the ranks before it, adds its own slice and passes it on, so each
// link carries the buffer once and slice j is added while slice j+1 travels (two slices in flight
// each way). The root's sum is x[root+1] + x[root+2] + ... + x[root] in that order.
void chain_reduce(const MpiRunContext& ctx, const Collective& c) {
  const std::size_t es = elem_size(c.out.type);
  const int n = ctx.size, pos = mod(ctx.rank - c.root - 1, n);  // 0: the chain's head; n - 1: the root
  const bool head = pos == 0, root = pos == n - 1;
  const int left = mod(ctx.rank - 1, n), right = mod(ctx.rank + 1, n);
  const int64_t count = c.out.count;
  if (count == 0) return;
  const int64_t S = Ring{ctx, c}.slice_elems(es);  // the ring's slices
  const int64_t slices = (count + S - 1) / S;
  const std::size_t slot_bytes = size_t(std::min(S, count)) * es;
  char* recv = head ? nullptr : static_cast<char*>(ctx.scratch.get(0, 2 * slot_bytes));
  char* partial = head || root ? nullptr : static_cast<char*>(ctx.scratch.get(1, 2 * slot_bytes));
  const std::string what = describe(c) + ": the reduce chain (did the ranks pass different sizes?)";
  MPI_Request recvs[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL}, sends[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  auto len = [&](int64_t j) { return std::min(S, count - j * S); };
  auto post_recv = [&](int64_t j) {
    check_mpi(MPI_Irecv(recv + (j % 2) * slot_bytes, int(len(j) * int64_t(es)), MPI_BYTE, left, kTag, ctx.comm,
                        &recvs[j % 2]),
              what);
  };
  if (!head) post_recv(0);
  for (int64_t j = 0; j < slices; ++j) {
    char* mine = ptr(c.out.data, j * S, es);
    const char* in = nullptr;  // the partial sum of the ranks before this one
    if (!head) {
      if (j + 1 < slices) post_recv(j + 1);
      wait_all({&recvs[j % 2], 1}, ctx.wait, what);
      in = recv + (j % 2) * slot_bytes;
    }
    if (root) {
      reduce_elements(mine, in, mine, len(j), c.out.type, c.op);
      continue;
    }
    wait_all({&sends[j % 2], 1}, ctx.wait, what);  // slice j - 2 left this slot
    const char* out = mine;
    if (!head) {
      reduce_elements(partial + (j % 2) * slot_bytes, in, mine, len(j), c.out.type, c.op);
      out = partial + (j % 2) * slot_bytes;
    }
    check_mpi(MPI_Isend(out, int(len(j) * int64_t(es)), MPI_BYTE, right, kTag, ctx.comm, &sends[j % 2]), what);
  }
  wait_all(sends, ctx.wait, what);
}

bool fits_int(int64_t count) { return count <= INT_MAX; }

void native(const MpiRunContext& ctx, const Collective& c) {
  MpiRuntime& rt = ctx.runtime;
  const MPI_Datatype dt = rt.datatype(c.out.type);
  const std::string what = describe(c);
  switch (c.kind) {
    case OpKind::AllReduce: {
      const void* send = c.in.data == c.out.data ? MPI_IN_PLACE : c.in.data;
      check_mpi(MPI_Allreduce(send, c.out.data, int(c.out.count), dt, rt.op(c.out.type, c.op), ctx.comm),
                what + ": MPI_Allreduce");
      return;
    }
    case OpKind::ReduceScatter: {
      // MPI_IN_PLACE would leave the result in chunk 0, not chunk rank: go through scratch.
      const bool in_place = c.out.data == ptr(c.in.data, c.out.count * ctx.rank, elem_size(c.out.type));
      void* recv = in_place ? ctx.scratch.get(0, size_t(c.out.bytes())) : c.out.data;
      check_mpi(MPI_Reduce_scatter_block(c.in.data, recv, int(c.out.count), dt, rt.op(c.out.type, c.op),
                                         ctx.comm),
                what + ": MPI_Reduce_scatter_block");
      if (in_place) std::memcpy(c.out.data, recv, size_t(c.out.bytes()));
      return;
    }
    case OpKind::AllGather: {
      const bool in_place = c.in.data == ptr(c.out.data, c.in.count * ctx.rank, elem_size(c.out.type));
      check_mpi(MPI_Allgather(in_place ? MPI_IN_PLACE : c.in.data, int(c.in.count), dt, c.out.data,
                              int(c.in.count), dt, ctx.comm),
                what + ": MPI_Allgather");
      return;
    }
    case OpKind::Broadcast: {
      const int64_t piece = kMaxMessage / int64_t(elem_size(c.out.type));
      int64_t off = 0;
      do {
        const int64_t len = std::min(piece, c.out.count - off);
        check_mpi(MPI_Bcast(c.out.slice(off, len).data, int(len), dt, c.root, ctx.comm), what + ": MPI_Bcast");
        off += len;
      } while (off < c.out.count);
      return;
    }
    case OpKind::Reduce: {  // in place at the root, in pieces MPI's int counts can hold
      const int64_t piece = kMaxMessage / int64_t(elem_size(c.out.type));
      int64_t off = 0;
      do {
        const int64_t len = std::min(piece, c.out.count - off);
        void* data = c.out.slice(off, len).data;
        const bool root = ctx.rank == c.root;
        check_mpi(MPI_Reduce(root ? MPI_IN_PLACE : data, root ? data : nullptr, int(len), dt, rt.op(c.out.type, c.op),
                             c.root, ctx.comm),
                  what + ": MPI_Reduce");
        off += len;
      } while (off < c.out.count);
      return;
    }
    case OpKind::AllToAll: {
      const int64_t chunk = c.out.count / ctx.size;
      DS_CHECK(fits_int(chunk), NotSupported,
               what + ": " + std::to_string(chunk) + " elements per rank exceed MPI's int count (split the buffer)");
      const void* send = c.in.data == c.out.data ? MPI_IN_PLACE : c.in.data;
      check_mpi(MPI_Alltoall(send, int(chunk), dt, c.out.data, int(chunk), dt, ctx.comm), what + ": MPI_Alltoall");
      return;
    }
    case OpKind::Barrier:
      check_mpi(MPI_Barrier(ctx.comm), what + ": MPI_Barrier");
      return;
    case OpKind::Split:  // MpiCommunicator::split_logged runs MPI_Comm_split itself
      DS_ASSERT(false, what + ": split is not a data collective");
      return;
  }
}

}  // namespace

void* Scratch::get(std::size_t slot, std::size_t bytes) {
  Block& b = blocks_[slot];
  if (b.bytes < bytes || !b.data) {
    const std::size_t rounded = std::max<std::size_t>((bytes + 63) / 64 * 64, 64);
    b.data.reset(static_cast<char*>(::operator new[](rounded, std::align_val_t(64))));
    b.bytes = rounded;
  }
  return b.data.get();
}

bool use_ring(const MpiRunContext& ctx, const Collective& c) {
  if (ctx.size < 2) return false;
  const bool ring_kind = c.kind == OpKind::AllReduce || c.kind == OpKind::ReduceScatter || c.kind == OpKind::AllGather;
  if (!ring_kind) return false;
  const int64_t per_rank = c.kind == OpKind::AllGather ? c.in.count : c.out.count;
  const int64_t total = c.kind == OpKind::AllReduce ? c.out.count : per_rank;
  if (!fits_int(total)) return true;  // MPI's counts are int; the ring slices
  switch (ctx.algorithm) {
    case MpiAlgorithm::Native: return false;
    case MpiAlgorithm::Ring: return true;
    case MpiAlgorithm::Auto: break;
  }
  // MPI_Allgather allocates nothing and matched the ring; but it can only be waited for spinning.
  if (c.kind == OpKind::AllGather && ctx.wait == MpiWait::Spin) return false;
  // The ring takes 2(N-1) (all_reduce) or N-1 steps where MPI's small-message algorithms take
  // about log2(N), so its break-even size grows with N (docs/comm.md, "Algorithm choice").
  const int64_t bytes = c.kind == OpKind::AllReduce ? c.out.bytes() : c.in.bytes();
  return bytes >= ctx.ring_threshold_bytes * (ctx.size - 1);
}

bool use_chain_reduce(const MpiRunContext& ctx, const Collective& c) {
  return c.kind == OpKind::Reduce && ctx.size > 1 && ctx.wait == MpiWait::Sleep &&
         ctx.algorithm != MpiAlgorithm::Native && c.out.bytes() >= ctx.ring_threshold_bytes;
}

void run_mpi_collective(const MpiRunContext& ctx, const Collective& c) {
  if (ctx.size == 1 && c.kind != OpKind::Barrier) {  // a world of one: every result is the input
    if (c.kind != OpKind::Broadcast && c.kind != OpKind::Reduce) copy_elements(c.out, c.in);
    return;
  }
  if (use_chain_reduce(ctx, c)) return chain_reduce(ctx, c);
  if (!use_ring(ctx, c)) return native(ctx, c);
  switch (c.kind) {
    case OpKind::AllReduce: return ring_all_reduce(ctx, c);
    case OpKind::ReduceScatter: return ring_reduce_scatter(ctx, c);
    case OpKind::AllGather: return ring_all_gather(ctx, c);
    default: return native(ctx, c);
  }
}

}  // namespace ds::comm
