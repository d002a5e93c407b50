// NCCL backend (see nccl_communicator.h). Compiled only with DS_WITH_NCCL; compiled and linked in
// CI where the CUDA toolkit is installed, not yet run on a GPU (docs/gpu.md).
#include "comm/nccl_communicator.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstdlib>
#include <string>

#include "comm/mpi_communicator.h"
#include "comm/serial_executor.h"
#include "util/error.h"

namespace ds::comm {
namespace {

void check_cuda(cudaError_t rc, const std::string& what) {
  DS_CHECK(rc == cudaSuccess, CommError, what + ": " + cudaGetErrorString(rc));
}
void check_nccl(ncclResult_t rc, const std::string& what) {
  DS_CHECK(rc == ncclSuccess, CommError, what + ": " + ncclGetErrorString(rc));
}

ncclDataType_t nccl_type(ElemType t) {
  switch (t) {
    case ElemType::Fp32: return ncclFloat32;
    case ElemType::Bf16: return ncclBfloat16;
    case ElemType::Fp16: return ncclFloat16;
    case ElemType::Fp64: return ncclFloat64;
    case ElemType::Int32: return ncclInt32;
    case ElemType::Int64: return ncclInt64;
    case ElemType::UInt8: return ncclUint8;
  }
  return ncclUint8;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  return op == ReduceOp::Sum ? ncclSum : op == ReduceOp::Max ? ncclMax : ncclMin;
}

}  // namespace

struct NcclCommunicator::Impl {
  std::unique_ptr<MpiCommunicator> bootstrap;
  ncclComm_t comm = nullptr;
  cudaStream_t stream = nullptr;
  int device = 0;
  void* barrier_word = nullptr;  // one int on the device for barrier()
  std::unique_ptr<SerialExecutor> waiter;  // waits on each collective's event, in order
};

NcclCommunicator::NcclCommunicator(const NcclOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  MpiOptions mo;
  mo.timeout_s = options.timeout_s;
  m.bootstrap = std::make_unique<MpiCommunicator>(mo);
  int devices = 0;
  check_cuda(cudaGetDeviceCount(&devices), "NcclCommunicator: cudaGetDeviceCount");
  DS_CHECK(devices > 0, CommError, "NcclCommunicator: no CUDA device is visible to rank " +
                                       std::to_string(m.bootstrap->rank()));
  int local = 0;
  if (const char* v = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK")) local = std::atoi(v);
  m.device = options.device >= 0 ? options.device : local % devices;
  check_cuda(cudaSetDevice(m.device), "NcclCommunicator: cudaSetDevice");
  ncclUniqueId id{};
  if (m.bootstrap->rank() == 0) check_nccl(ncclGetUniqueId(&id), "NcclCommunicator: ncclGetUniqueId");
  m.bootstrap->broadcast(Buffer(reinterpret_cast<uint8_t*>(&id), int64_t(sizeof id)), 0, "nccl_unique_id");
  check_nccl(ncclCommInitRank(&m.comm, m.bootstrap->size(), id, m.bootstrap->rank()), "ncclCommInitRank");
  check_cuda(cudaStreamCreateWithFlags(&m.stream, cudaStreamNonBlocking), "cudaStreamCreate");
  check_cuda(cudaMalloc(&m.barrier_word, sizeof(int)), "cudaMalloc (barrier word)");
  m.waiter = std::make_unique<SerialExecutor>();
}

NcclCommunicator::~NcclCommunicator() {
  Impl& m = *impl_;
  m.waiter.reset();  // every queued Work completes first
  if (m.stream) cudaStreamSynchronize(m.stream);
  if (m.comm) ncclCommDestroy(m.comm);
  if (m.barrier_word) cudaFree(m.barrier_word);
  if (m.stream) cudaStreamDestroy(m.stream);
}

int NcclCommunicator::rank() const noexcept { return impl_->bootstrap->rank(); }
int NcclCommunicator::size() const noexcept { return impl_->bootstrap->size(); }

Work NcclCommunicator::launch(const Collective& c) {
  Impl& m = *impl_;
  auto state = std::make_shared<detail::WorkState>();
  cudaEvent_t done = nullptr;
  // Enqueue on the stream now (issue order = stream order); errors here fail the Work directly.
  auto error = run_logged(c, [&] {
    check_cuda(cudaSetDevice(m.device), describe(c) + ": cudaSetDevice");
    const ncclDataType_t dt = nccl_type(c.out.type);
    const std::string what = describe(c);
    switch (c.kind) {
      case OpKind::AllReduce:
        check_nccl(ncclAllReduce(c.in.data, c.out.data, size_t(c.out.count), dt, nccl_op(c.op), m.comm, m.stream), what);
        break;
      case OpKind::ReduceScatter:
        check_nccl(ncclReduceScatter(c.in.data, c.out.data, size_t(c.out.count), dt, nccl_op(c.op), m.comm, m.stream), what);
        break;
      case OpKind::AllGather:
        check_nccl(ncclAllGather(c.in.data, c.out.data, size_t(c.in.count), dt, m.comm, m.stream), what);
        break;
      case OpKind::Broadcast:
        check_nccl(ncclBroadcast(c.out.data, c.out.data, size_t(c.out.count), dt, c.root, m.comm, m.stream), what);
        break;
      case OpKind::Reduce:
        check_nccl(ncclReduce(c.out.data, c.out.data, size_t(c.out.count), dt, nccl_op(c.op), c.root, m.comm, m.stream),
                   what);
        break;
      case OpKind::AllToAll: {
        DS_CHECK(c.in.data != c.out.data, NotSupported, what + ": in-place all_to_all is not supported by NCCL");
        const int64_t chunk = c.out.count / size();
        const std::size_t es = elem_size(c.out.type);
        check_nccl(ncclGroupStart(), what);
        for (int peer = 0; peer < size(); ++peer) {
          check_nccl(ncclSend(static_cast<const char*>(c.in.data) + peer * chunk * int64_t(es), size_t(chunk), dt,
                              peer, m.comm, m.stream), what);
          check_nccl(ncclRecv(static_cast<char*>(c.out.data) + peer * chunk * int64_t(es), size_t(chunk), dt, peer,
                              m.comm, m.stream), what);
        }
        check_nccl(ncclGroupEnd(), what);
        break;
      }
      case OpKind::Barrier:
        check_nccl(ncclAllReduce(m.barrier_word, m.barrier_word, 1, ncclInt32, ncclSum, m.comm, m.stream), what);
        break;
      case OpKind::Split:  // never launched: split() goes through split_logged (not implemented for NCCL yet)
        throw NotSupported(what + ": split is not a data collective");
    }
    check_cuda(cudaEventCreateWithFlags(&done, cudaEventDisableTiming), what + ": cudaEventCreate");
    check_cuda(cudaEventRecord(done, m.stream), what + ": cudaEventRecord");
  });
  if (error) return Work::completed(c.seq, std::move(error));
  m.waiter->post([state, done, c] {
    const cudaError_t rc = cudaEventSynchronize(done);
    cudaEventDestroy(done);
    state->complete(rc == cudaSuccess ? nullptr
                                      : std::make_exception_ptr(CommError(describe(c) + ": " + cudaGetErrorString(rc))));
  });
  return Work(state, c.seq);
}

}  // namespace ds::comm
