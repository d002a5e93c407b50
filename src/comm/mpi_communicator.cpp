// MpiCommunicator: MPI setup, the worker thread, and the watchdog's diagnostic.
#include "comm/mpi_communicator.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "comm/mpi_collectives.h"
#include "comm/mpi_runtime.h"
#include "comm/mpi_wait.h"
#include "comm/serial_executor.h"
#include "comm/watchdog.h"
#include "util/error.h"

namespace ds::comm {

// Exit code of a job the watchdog aborted (MPI_Abort's errorcode; mpirun returns it).
constexpr int kWatchdogAbortCode = 86;
constexpr int kAbortGraceS = 5;

struct MpiCommunicator::Impl {
  MpiOptions options;
  std::shared_ptr<MpiRuntime> runtime;
  MPI_Comm comm = MPI_COMM_NULL;
  int rank = 0;
  int size = 1;
  Scratch scratch;  // used only on the worker thread
  double timeout_s = 0;
  bool own_hosts = false;  // every rank of `comm` alone on its host (found where comm is made)
  MpiWait wait = MpiWait::Spin;
  // The collective the worker is running (0: none) and since when, for the watchdog.
  std::atomic<uint64_t> running_seq{0};
  std::atomic<int64_t> running_since_ns{0};
  std::unique_ptr<Watchdog> watchdog;
  std::unique_ptr<SerialExecutor> worker;  // last member: destroyed (drained) first

  MpiRunContext context() {
    const MpiAlgorithm a = options.algorithm == MpiAlgorithmChoice::Native ? MpiAlgorithm::Native
                           : options.algorithm == MpiAlgorithmChoice::Ring ? MpiAlgorithm::Ring
                                                                           : MpiAlgorithm::Auto;
    return MpiRunContext{comm, rank, size, *runtime, scratch, a, options.ring_threshold_bytes,
                         options.ring_slice_bytes, wait};
  }
};

namespace {
// Whether every rank of `comm` is alone on its host (a collective over `comm`).
bool every_rank_on_its_own_host(MPI_Comm comm) {
  MPI_Comm local = MPI_COMM_NULL;
  check_mpi(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local),
            "MpiCommunicator: MPI_Comm_split_type");
  int local_size = 0, most = 0;
  check_mpi(MPI_Comm_size(local, &local_size), "MpiCommunicator: MPI_Comm_size");
  MPI_Comm_free(&local);
  check_mpi(MPI_Allreduce(&local_size, &most, 1, MPI_INT, MPI_MAX, comm), "MpiCommunicator: MPI_Allreduce");
  return most == 1;
}

MpiWait choose_wait(MpiWaitChoice choice, bool own_hosts) {
  if (choice == MpiWaitChoice::Auto) {
    const char* env = std::getenv("DS_COMM_WAIT");
    const std::string v = env ? env : "auto";
    DS_CHECK(v == "auto" || v == "spin" || v == "sleep", CommError,
             "DS_COMM_WAIT='" + v + "': expected spin, sleep or auto");
    choice = v == "spin" ? MpiWaitChoice::Spin : v == "sleep" ? MpiWaitChoice::Sleep : MpiWaitChoice::Auto;
  }
  if (choice == MpiWaitChoice::Auto) return own_hosts ? MpiWait::Sleep : MpiWait::Spin;
  return choice == MpiWaitChoice::Sleep ? MpiWait::Sleep : MpiWait::Spin;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

MpiCommunicator::MpiCommunicator(const MpiOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.options = options;
  m.timeout_s = options.timeout_s < 0 ? comm_timeout_from_env() : options.timeout_s;
  m.runtime = MpiRuntime::acquire(MpiInitOptions{options.tune_transport});
  {
    auto lock = m.runtime->serialize();
    check_mpi(MPI_Comm_dup(MPI_COMM_WORLD, &m.comm), "MpiCommunicator: MPI_Comm_dup");
    // Every rank takes part whatever it is told, so a DS_COMM_WAIT set on some ranks only cannot hang.
    m.own_hosts = every_rank_on_its_own_host(m.comm);
  }
  start();
}

MpiCommunicator::MpiCommunicator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) { start(); }

void MpiCommunicator::start() {
  Impl& m = *impl_;
  {
    auto lock = m.runtime->serialize();
    check_mpi(MPI_Comm_set_errhandler(m.comm, MPI_ERRORS_RETURN), "MpiCommunicator: MPI_Comm_set_errhandler");
    check_mpi(MPI_Comm_rank(m.comm, &m.rank), "MpiCommunicator: MPI_Comm_rank");
    check_mpi(MPI_Comm_size(m.comm, &m.size), "MpiCommunicator: MPI_Comm_size");
  }
  m.wait = choose_wait(m.options.wait, m.size > 1 && m.own_hosts);
  if (m.timeout_s > 0) {
    auto probe = [&m]() -> std::optional<double> {
      if (m.running_seq.load() == 0) return std::nullopt;
      return double(now_ns() - m.running_since_ns.load()) * 1e-9;
    };
    auto on_timeout = [this, &m](double running_s) {
      const uint64_t seq = m.running_seq.load();
      std::string current = "#";
      current += std::to_string(seq);
      for (const auto& r : log_.last())
        if (r.seq == seq) current = format_record(r);
      std::fprintf(stderr,
                   "[deepspeed.cpp] rank %d/%d: comm watchdog: collective %s has not completed after %.1f s "
                   "(DS_COMM_TIMEOUT_S=%g). Another rank probably stopped issuing collectives (it crashed, "
                   "hangs, or took a different code path). Last collectives on this rank, oldest first:\n%s"
                   "[deepspeed.cpp] rank %d: calling MPI_Abort(%d)\n",
                   m.rank, m.size, current.c_str(), running_s, m.timeout_s, log_.format().c_str(), m.rank,
                   kWatchdogAbortCode);
      std::fflush(stderr);
      // The whole job, not only this (possibly sub-) communicator's group: every rank must stop.
      // MPI_Abort goes through the launcher's daemons; when the network to them is gone (a cut link,
      // a dead host) it never returns, so the process ends itself after a grace period regardless.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(kAbortGraceS));
        std::fprintf(stderr, "[deepspeed.cpp] MPI_Abort did not end this process within %d s: exiting\n", kAbortGraceS);
        std::_Exit(kWatchdogAbortCode);
      }).detach();
      MPI_Abort(MPI_COMM_WORLD, kWatchdogAbortCode);
    };
    m.watchdog = std::make_unique<Watchdog>(m.timeout_s, probe, on_timeout);
  }
  m.worker = std::make_unique<SerialExecutor>();
}

MpiCommunicator::~MpiCommunicator() {
  Impl& m = *impl_;
  m.worker.reset();    // runs what is queued: pending Work handles complete
  m.watchdog.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && m.comm != MPI_COMM_NULL) {
    auto lock = m.runtime->serialize();
    MPI_Comm_free(&m.comm);
  }
}

int MpiCommunicator::rank() const noexcept { return impl_->rank; }
int MpiCommunicator::size() const noexcept { return impl_->size; }
const MpiOptions& MpiCommunicator::options() const noexcept { return impl_->options; }
int MpiCommunicator::mpi_thread_level() const noexcept { return impl_->runtime->thread_level(); }
double MpiCommunicator::watchdog_timeout_s() const noexcept { return impl_->watchdog ? impl_->timeout_s : 0; }
bool MpiCommunicator::sleeps_while_waiting() const noexcept { return impl_->wait == MpiWait::Sleep; }

Work MpiCommunicator::launch(const Collective& c) {
  auto state = std::make_shared<detail::WorkState>();
  impl_->worker->post([this, c, state] {
    Impl& m = *impl_;
    m.running_since_ns.store(now_ns());
    m.running_seq.store(c.seq);
    auto error = run_logged(c, [&] {
      auto lock = m.runtime->serialize();
      run_mpi_collective(m.context(), c);
    });
    m.running_seq.store(0);
    state->complete(std::move(error));
  });
  return Work(state, c.seq);
}

std::unique_ptr<Communicator> MpiCommunicator::split_logged(const Collective& c, int color, int key) {
  Impl& m = *impl_;
  MPI_Comm child = MPI_COMM_NULL;
  bool child_own_hosts = false;
  auto state = std::make_shared<detail::WorkState>();
  // On the worker, like a collective: it must not run concurrently with this communicator's other
  // MPI calls, and the watchdog sees it if a rank never joins.
  m.worker->post([this, &m, &child, &child_own_hosts, c, color, key, state] {
    m.running_since_ns.store(now_ns());
    m.running_seq.store(c.seq);
    auto error = run_logged(c, [&] {
      auto lock = m.runtime->serialize();
      check_mpi(MPI_Comm_split(m.comm, color == kNoGroup ? MPI_UNDEFINED : color, key, &child),
                describe(c) + ": MPI_Comm_split");
      // Here, in issue order with the parent's collectives, as the split itself.
      if (child != MPI_COMM_NULL) child_own_hosts = every_rank_on_its_own_host(child);
    });
    m.running_seq.store(0);
    state->complete(std::move(error));
  });
  Work(state, c.seq).wait();  // throws the split's error; `child` is written before completion
  if (child == MPI_COMM_NULL) return nullptr;
  auto impl = std::make_unique<Impl>();
  impl->options = m.options;
  impl->timeout_s = m.timeout_s;
  impl->runtime = m.runtime;
  impl->comm = child;
  impl->own_hosts = child_own_hosts;
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(impl)));
}

}  // namespace ds::comm
