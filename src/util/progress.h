// The training progress line: a tqdm-like bar redrawn in place when stdout is an interactive
// terminal, plain periodic lines otherwise (CI logs, files, MPI ranks), so `\r` never corrupts a log
// (conventions.md §4.7).
#pragma once

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ds {

enum class ProgressMode { Auto, Bar, Lines, Off };

struct ProgressOptions {
  std::int64_t total_steps = 0;
  ProgressMode mode = ProgressMode::Auto;  // Auto: Bar when interactive_terminal(out), else Lines; Bar forces it
  std::int64_t line_every = 10;            // Lines mode: print every N steps (and the last)
  std::FILE* out = stdout;
};

struct ProgressStats {
  std::int64_t step = 0;  // steps completed so far (1-based after the first)
  double loss = 0.0;
  double lr = 0.0;
  double tokens_per_s = 0.0;
  std::uint64_t memory_bytes = 0;
};

class ProgressReporter {
 public:
  explicit ProgressReporter(ProgressOptions options);
  ~ProgressReporter();  // ends a bar with a newline

  void update(const ProgressStats& stats);
  void finish();
  ProgressMode mode() const { return mode_; }

  // Exposed for tests: the text of one bar or line for these stats at `elapsed_s` seconds.
  std::string render_bar(const ProgressStats& s, double elapsed_s) const;
  std::string render_line(const ProgressStats& s, double elapsed_s) const;

 private:
  ProgressOptions options_;
  ProgressMode mode_;
  std::chrono::steady_clock::time_point start_;
  bool open_bar_ = false;
};

// True in a process an MPI launcher started as a rank (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE or
// PMIX_RANK is set): its stdout is forwarded by mpirun, usually into a log.
bool launched_as_mpi_rank();

// `out` is a terminal a person watches: a TTY, TERM is not "dumb", and this is not an MPI rank
// (Open MPI gives ranks a pseudo-terminal even when mpirun's output goes to a file).
bool interactive_terminal(std::FILE* out);

// "01:05" or "1:02:03".
std::string format_duration(double seconds);

}  // namespace ds
