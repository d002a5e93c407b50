// MPI initialization, finalization, and the bf16/fp16 datatypes and reduction ops.
#include "comm/mpi_runtime.h"
#include "comm/mpi_exit.h"

#include <cstdlib>
#include <string>

#include "comm/kernels.h"
#include "util/error.h"

namespace ds::comm {
namespace {

// MPI_User_function for 16-bit floats: inout[i] = in[i] op inout[i], each pair widened to fp32
// and the result rounded back to nearest-even (so a sum over N ranks rounds N-1 times).
template <ElemType T, ReduceOp Op>
void half_op(void* in, void* inout, int* len, MPI_Datatype*) {
  reduce_elements(inout, in, inout, *len, T, Op);
}

// Defaults that measured faster, on shared-memory nodes and between hosts (docs/comm.md, "Open MPI
// settings").
// setenv before MPI_Init is how Open MPI's MCA parameters are read; existing values win.
void export_transport_defaults() {
  // Open MPI's CMA single-copy path (process_vm_readv) measured slower than copying through the
  // shared-memory segment for large messages, and it fails where ptrace is restricted.
  ::setenv("OMPI_MCA_btl_vader_single_copy_mechanism", "none", /*overwrite=*/0);
  // Between hosts, the TCP transport's emulated RDMA put moves a large message as one fragment, and
  // two such messages crossing one connection in opposite directions often took turns: over a
  // 1 Gbit/s link, 100 MiB each way took 1.75-2.3 s in 5 of 16 tries and a ring's 4 MiB slices ran
  // at half the link's rate, against 0.9 s and full duplex with the put left out (docs/comm.md,
  // "Open MPI settings"). The other flags are Open MPI 4.1's defaults.
  ::setenv("OMPI_MCA_btl_tcp_flags", "send,inplace,need-ack,need-csum", /*overwrite=*/0);
}

}  // namespace

std::string_view thread_level_name(int level) noexcept {
  switch (level) {
    case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
    case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
    case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
    case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  }
  return "unknown MPI thread level";
}

void check_mpi(int rc, std::string_view what) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING] = {};
  int len = 0;
  if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) len = 0;
  int cls = rc;
  MPI_Error_class(rc, &cls);
  throw CommError(std::string(what) + ": " + std::string(text, size_t(len)) + " (MPI error class " +
                  std::to_string(cls) + ")");
}

std::shared_ptr<MpiRuntime> MpiRuntime::acquire(const MpiInitOptions& options) {
  // MPI is one per process, so its owner is too: the only process-wide state of src/comm. It lives
  // until the process exits (static destruction finalizes MPI), not until the last communicator goes:
  // MPI cannot be initialized again once finalized, and a program may build a second engine after the
  // first is destroyed.
  static std::mutex mu;
  static std::shared_ptr<MpiRuntime> current;
  std::lock_guard lock(mu);
  if (current) return current;

  int finalized = 0;
  MPI_Finalized(&finalized);
  DS_CHECK(!finalized, CommError,
           "MPI was finalized in this process by someone else (MPI_Finalize was called) and cannot be "
           "initialized again; create deepspeed.cpp's communicators before finalizing MPI");
  auto rt = std::shared_ptr<MpiRuntime>(new MpiRuntime());
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    if (options.tune_transport) export_transport_defaults();
    // MULTIPLE: our own calls only need SERIALIZED (each communicator calls MPI from its one
    // worker thread), but two communicators, the watchdog's MPI_Abort, or the user's own MPI
    // calls may run on other threads at the same time.
    check_mpi(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &rt->thread_level_),
              "MPI_Init_thread");
    rt->initialized_here_ = true;
  } else {
    MPI_Query_thread(&rt->thread_level_);
  }
  DS_CHECK(rt->thread_level_ >= MPI_THREAD_SERIALIZED, CommError,
           "MPI runs at " + std::string(thread_level_name(rt->thread_level_)) +
               "; deepspeed.cpp's communicator needs MPI_THREAD_SERIALIZED or MPI_THREAD_MULTIPLE "
               "(initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or let the "
               "communicator initialize it)");
  rt->create_types_and_ops();
  current = rt;
  return rt;
}

void MpiRuntime::create_types_and_ops() {
  for (MPI_Datatype* t : {&bf16_, &fp16_}) {
    check_mpi(MPI_Type_contiguous(2, MPI_BYTE, t), "MPI_Type_contiguous (16-bit float type)");
    check_mpi(MPI_Type_commit(t), "MPI_Type_commit (16-bit float type)");
  }
  MPI_User_function* fns[2][3] = {
      {half_op<ElemType::Bf16, ReduceOp::Sum>, half_op<ElemType::Bf16, ReduceOp::Max>,
       half_op<ElemType::Bf16, ReduceOp::Min>},
      {half_op<ElemType::Fp16, ReduceOp::Sum>, half_op<ElemType::Fp16, ReduceOp::Max>,
       half_op<ElemType::Fp16, ReduceOp::Min>}};
  for (int t = 0; t < 2; ++t)
    for (int o = 0; o < 3; ++o)
      check_mpi(MPI_Op_create(fns[t][o], /*commute=*/1, &ops_[t][o]), "MPI_Op_create (16-bit float op)");
}

MpiRuntime::~MpiRuntime() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;
  for (auto& row : ops_)
    for (MPI_Op& op : row)
      if (op != MPI_OP_NULL && op != MPI_Op{}) MPI_Op_free(&op);
  if (bf16_ != MPI_DATATYPE_NULL) MPI_Type_free(&bf16_);
  if (fp16_ != MPI_DATATYPE_NULL) MPI_Type_free(&fp16_);
  if (initialized_here_) MPI_Finalize();
}

MPI_Datatype MpiRuntime::datatype(ElemType t) const noexcept {
  switch (t) {
    case ElemType::Fp32: return MPI_FLOAT;
    case ElemType::Fp64: return MPI_DOUBLE;
    case ElemType::Int32: return MPI_INT32_T;
    case ElemType::Int64: return MPI_INT64_T;
    case ElemType::UInt8: return MPI_UINT8_T;
    case ElemType::Bf16: return bf16_;
    case ElemType::Fp16: return fp16_;
  }
  return MPI_BYTE;
}

MPI_Op MpiRuntime::op(ElemType t, ReduceOp op) const noexcept {
  const int o = op == ReduceOp::Sum ? 0 : op == ReduceOp::Max ? 1 : 2;
  if (t == ElemType::Bf16) return ops_[0][o];
  if (t == ElemType::Fp16) return ops_[1][o];
  return o == 0 ? MPI_SUM : o == 1 ? MPI_MAX : MPI_MIN;
}

std::unique_lock<std::mutex> MpiRuntime::serialize() {
  if (thread_level_ >= MPI_THREAD_MULTIPLE) return {};
  return std::unique_lock<std::mutex>(mu_);
}

void finalize_mpi_for_exit() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized) MPI_Finalize();
}

}  // namespace ds::comm
