// SerialExecutor: one worker thread running posted tasks in order. MpiCommunicator runs all of a
// communicator's MPI calls on it, which gives async collectives real overlap with the caller's
// work and keeps every collective in issue order.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace ds::comm {

class SerialExecutor {
 public:
  SerialExecutor();
  ~SerialExecutor();  // runs every task already posted, then joins the thread
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Queues `task` (which must not throw) behind the tasks already posted.
  void post(std::function<void()> task);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace ds::comm
