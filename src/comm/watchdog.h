// Watchdog: a thread that notices a collective running longer than a timeout (a peer rank that
// crashed, hung, or took another code path) and reports it instead of letting the job hang
// forever. The timeout comes from DS_COMM_TIMEOUT_S (seconds; 0 disables; default 1800, like
// torch.distributed's default). MpiCommunicator's report prints the rank's last collectives to
// stderr and calls MPI_Abort, which ends every rank of the job with a non-zero exit code.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>

namespace ds::comm {

inline constexpr double kDefaultCommTimeoutS = 1800.0;

// DS_COMM_TIMEOUT_S when set (a number >= 0), else `fallback`. Throws ds::CommError on a
// malformed value, naming the variable.
double comm_timeout_from_env(double fallback = kDefaultCommTimeoutS);

class Watchdog {
 public:
  // probe(): how long the current collective has been running, or nullopt when none is.
  using Probe = std::function<std::optional<double>()>;
  // on_timeout(running_s): called once, from the watchdog thread, when a collective exceeds the
  // timeout. It may not return (MPI_Abort); if it does, the watchdog stops watching.
  using OnTimeout = std::function<void(double running_s)>;

  // timeout_s > 0. Polls every min(1 s, timeout_s / 4).
  Watchdog(double timeout_s, Probe probe, OnTimeout on_timeout);
  ~Watchdog();
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  double timeout_s() const noexcept { return timeout_s_; }

 private:
  void loop();

  double timeout_s_;
  Probe probe_;
  OnTimeout on_timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ds::comm
