#include "util/progress.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

#include "util/system_info.h"

namespace ds {
namespace {

ProgressMode resolve_mode(ProgressMode m, std::FILE* out) {
  if (m != ProgressMode::Auto) return m;
  return interactive_terminal(out) ? ProgressMode::Bar : ProgressMode::Lines;
}

double eta_seconds(const ProgressStats& s, std::int64_t total, double elapsed) {
  if (s.step <= 0 || total <= s.step) return 0.0;
  return elapsed / static_cast<double>(s.step) * static_cast<double>(total - s.step);
}

}  // namespace

bool launched_as_mpi_rank() {
  // Open MPI sets the first two in every rank, PMIx-based launchers the third.
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK"})
    if (std::getenv(name) != nullptr) return true;
  return false;
}

bool interactive_terminal(std::FILE* out) {
  // Open MPI gives each rank a pseudo-terminal for stdout even when mpirun's own output goes to a
  // file or a pipe (measured: /dev/pts/N under `mpirun ... > log`), so isatty() alone would put
  // \r and ESC[K into logs.
  const char* term = std::getenv("TERM");
  const bool dumb = term != nullptr && std::string(term) == "dumb";
  return isatty(fileno(out)) && !dumb && !launched_as_mpi_rank();
}

std::string format_duration(double seconds) {
  auto t = static_cast<long>(std::llround(std::max(0.0, seconds)));
  if (t >= 3600) return fmt::format("{}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{:02}:{:02}", t / 60, t % 60);
}

ProgressReporter::ProgressReporter(ProgressOptions options)
    : options_(options), mode_(resolve_mode(options.mode, options.out)),
      start_(std::chrono::steady_clock::now()) {}

ProgressReporter::~ProgressReporter() { finish(); }

std::string ProgressReporter::render_bar(const ProgressStats& s, double elapsed) const {
  const int width = 20;
  double frac = options_.total_steps > 0 ? static_cast<double>(s.step) / options_.total_steps : 0.0;
  frac = std::min(1.0, std::max(0.0, frac));
  // Eighth-block glyphs give the bar sub-character resolution, as tqdm does.
  static const char* kPartial[] = {"", "▏", "▎", "▍", "▌", "▋", "▊", "▉"};
  int eighths = static_cast<int>(frac * width * 8);
  std::string bar;
  int full = eighths / 8;
  for (int i = 0; i < full; ++i) bar += "█";
  int cells = full;
  if (full < width) {
    bar += kPartial[eighths % 8];
    if (eighths % 8) ++cells;
  }
  bar.append(static_cast<std::size_t>(width - cells), ' ');
  double rate = elapsed > 0 ? s.step / elapsed : 0.0;
  return fmt::format("{:3.0f}%|{}| {}/{} [{}<{}, {:.2f}it/s] loss={:.4f} lr={:.3e} tok/s={:.0f} mem={}",
                     frac * 100.0, bar, s.step, options_.total_steps, format_duration(elapsed),
                     format_duration(eta_seconds(s, options_.total_steps, elapsed)), rate, s.loss,
                     s.lr, s.tokens_per_s, format_bytes(s.memory_bytes));
}

std::string ProgressReporter::render_line(const ProgressStats& s, double elapsed) const {
  return fmt::format("step {}/{} loss={:.4f} lr={:.3e} tokens/s={:.0f} elapsed={} eta={} mem={}", s.step,
                     options_.total_steps, s.loss, s.lr, s.tokens_per_s, format_duration(elapsed),
                     format_duration(eta_seconds(s, options_.total_steps, elapsed)),
                     format_bytes(s.memory_bytes));
}

void ProgressReporter::update(const ProgressStats& s) {
  double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  switch (mode_) {
    case ProgressMode::Off:
    case ProgressMode::Auto:
      return;
    case ProgressMode::Bar:
      fmt::print(options_.out, "\r{}\x1b[K", render_bar(s, elapsed));
      std::fflush(options_.out);
      open_bar_ = true;
      return;
    case ProgressMode::Lines:
      if (s.step == 1 || s.step % std::max<std::int64_t>(1, options_.line_every) == 0 ||
          s.step == options_.total_steps) {
        fmt::print(options_.out, "{}\n", render_line(s, elapsed));
        std::fflush(options_.out);
      }
      return;
  }
}

void ProgressReporter::finish() {
  if (open_bar_) {
    std::fputc('\n', options_.out);
    std::fflush(options_.out);
    open_bar_ = false;
  }
}

}  // namespace ds
