// ds-io-bench: read and write bandwidth of the async I/O engine on one file, like DeepSpeed's
// ds_io (deepspeed/nvme): it tells you what an nvme_path can deliver and which aio settings get
// there before you point ZeRO-Infinity at it.
//
//   ds-io-bench --path /mnt/nvme --size 4G --block-size 1M --queue-depth 32
//   ds-io-bench --path /mnt/nvme/bench.dat --threads 2 --backend threads --reps 5
//
// The file is laid out once (an untimed write; skipped when it already has the size), then each repetition times one whole-file write
// (overwrite) and one whole-file read with O_DIRECT. The engine cuts the file into block_size
// requests and keeps queue_depth of them in flight per thread, as in training. A directory
// --path gets a temporary file, removed at the end; a --path FILE is removed unless --keep (an
// existing one is refused without --overwrite).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "aio/aio_engine.h"
#include "cli_checks.h"
#include "aio/nvme_path.h"
#include "util/error.h"

namespace {

using ds::aio::AioEngine;
using ds::aio::AlignedBuffer;

// "4G", "512M", "1m", "4096" → bytes; anything else, or not positive, is refused naming `option`.
int64_t parse_size(const std::string& s, const std::string& option) {
  const std::string usage = "\"" + s + "\" is not a size (use e.g. 4096, 64K, 1M, 4G)";
  size_t end = 0;
  double v = 0;
  try {
    v = std::stod(s, &end);
  } catch (const std::exception&) {
    throw ds::ConfigError(option, usage);
  }
  int64_t mult = 1;
  if (end < s.size()) {
    if (end + 1 != s.size()) throw ds::ConfigError(option, usage);
    switch (s[end]) {
      case 'k': case 'K': mult = 1ll << 10; break;
      case 'm': case 'M': mult = 1ll << 20; break;
      case 'g': case 'G': mult = 1ll << 30; break;
      case 't': case 'T': mult = 1ll << 40; break;
      default: throw ds::ConfigError(option, usage);
    }
  }
  const double bytes = v * static_cast<double>(mult);
  if (!(std::isfinite(bytes) && bytes >= 1 && bytes <= double(1ll << 50)))
    throw ds::ConfigError(option, s + " must be from 1 byte to 1P");
  return static_cast<int64_t>(bytes);
}

// One whole-file transfer as ops of `chunk` bytes (all in flight at once, sharing one buffer:
// the benchmark measures the device, not the data), timed.
double transfer(AioEngine& e, ds::aio::IoOp op, const std::string& file, AlignedBuffer& buf,
                int64_t size) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t off = 0; off < size; off += buf.size()) {
    const int64_t n = std::min(buf.size(), size - off);
    e.submit({op, file, buf.data(), n, off});
  }
  e.wait_all();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = "/tmp", size_s = "1G", block_s = "1M", chunk_s = "256M", backend_s = "auto";
  int64_t queue_depth = 32, threads = 1;
  int reps = 3;
  bool single_submit = false, no_overlap = false, keep = false, read_only = false, write_only = false,
       overwrite = false;
  CLI::App app{"ds-io-bench: read/write GB/s of deepspeed.cpp's async I/O engine (O_DIRECT)"};
  app.add_option("--path", path, "a directory (a temporary file is made there) or a file")->capture_default_str();
  app.add_option("--size", size_s, "file size (K, M, G suffixes)")->capture_default_str();
  app.add_option("--block-size", block_s, "aio.block_size: bytes per kernel request")->capture_default_str();
  app.add_option("--queue-depth", queue_depth, "aio.queue_depth: requests in flight per thread")->capture_default_str()
      ->check(ds::tools::whole_number(1, 65536));
  app.add_option("--threads", threads, "aio.intra_op_parallelism: I/O threads per request")->capture_default_str()
      ->check(ds::tools::whole_number(1, 1024));
  app.add_option("--io-size", chunk_s, "bytes per submitted op (the RAM buffer's size)")->capture_default_str();
  app.add_option("--backend", backend_s, "auto, uring or threads")->capture_default_str();
  app.add_option("--reps", reps, "timed repetitions of each direction")->capture_default_str()
      ->check(ds::tools::whole_number(1, 1000000));
  app.add_flag("--single-submit", single_submit, "aio.single_submit: one submit call per request");
  app.add_flag("--no-overlap-events", no_overlap, "aio.overlap_events=false: batch, drain, repeat");
  app.add_flag("--read-only", read_only, "time reads only (the file is still laid out first)");
  app.add_flag("--write-only", write_only, "time writes only");
  app.add_flag("--keep", keep, "keep the file");
  app.add_flag("--overwrite", overwrite, "allow --path to name an existing file (it is overwritten)");
  CLI11_PARSE(app, argc, argv);

  try {
    ds::aio::AioOptions o;
    o.block_size = parse_size(block_s, "--block-size");
    o.queue_depth = queue_depth;
    o.intra_op_parallelism = threads;
    o.single_submit = single_submit;
    o.overlap_events = !no_overlap;
    o.backend = ds::aio::parse_backend(backend_s, "--backend");
    const int64_t size = ds::aio::align_up(parse_size(size_s, "--size"));
    const int64_t chunk = ds::aio::align_up(std::min(parse_size(chunk_s, "--io-size"), size));
    std::string file = path;
    const bool temp = std::filesystem::is_directory(path);
    if (temp) {
      ds::aio::validate_nvme_path(path, "--path");
      ds::aio::check_free_space(path, static_cast<uint64_t>(size), "--path");
      file = path + "/ds_io_bench." + std::to_string(::getpid()) + ".dat";
    } else if (std::filesystem::exists(path) && !overwrite) {
      throw ds::ConfigError("--path", "\"" + path + "\" exists and would be overwritten (pass --overwrite, "
                                      "or give a directory for a temporary file)");
    }
    AioEngine engine(o);
    AlignedBuffer buf(chunk);
    for (int64_t i = 0; i < chunk; i += 8) buf.data()[i] = std::byte(i * 131 & 0xff);
    struct Cleanup {
      std::string f;
      bool remove;
      ~Cleanup() {
        std::error_code ec;
        if (remove) std::filesystem::remove(f, ec);
      }
    } cleanup{file, temp || !keep};

    // Lay out the file (untimed) unless it is already there at full size, so timed writes are
    // overwrites as in fio, and a script can interleave runs on one file.
    std::error_code ec;
    const auto existing = std::filesystem::file_size(file, ec);
    if (ec || static_cast<int64_t>(existing) < size)
      transfer(engine, ds::aio::IoOp::Write, file, buf, size);
    std::vector<double> rd, wr;
    for (int r = 0; r < reps; ++r) {
      if (!read_only) wr.push_back(size / transfer(engine, ds::aio::IoOp::Write, file, buf, size) / 1e9);
      if (!write_only) rd.push_back(size / transfer(engine, ds::aio::IoOp::Read, file, buf, size) / 1e9);
    }
    const std::string backend = ds::aio::to_string(engine.backend()) +
                                (engine.buffered_reason().empty() ? "" : " (buffered)");
    std::printf("ds-io-bench  file %s  size %s  backend %s\n", file.c_str(),
                ds::aio::format_bytes(static_cast<uint64_t>(size)).c_str(), backend.c_str());
    std::printf("block_size %s  queue_depth %lld  threads %lld  io_size %s  single_submit %d  overlap_events %d\n",
                ds::aio::format_bytes(static_cast<uint64_t>(o.block_size)).c_str(),
                static_cast<long long>(queue_depth), static_cast<long long>(threads),
                ds::aio::format_bytes(static_cast<uint64_t>(chunk)).c_str(), single_submit ? 1 : 0,
                no_overlap ? 0 : 1);
    std::printf("\n%-6s %5s %10s %10s %10s  (GB/s, 1 GB = 1e9 bytes)\n", "op", "reps", "median", "best", "worst");
    auto row = [](const char* name, const std::vector<double>& v) {
      if (v.empty()) return;
      std::printf("%-6s %5zu %10.3f %10.3f %10.3f\n", name, v.size(), median(v),
                  *std::max_element(v.begin(), v.end()), *std::min_element(v.begin(), v.end()));
    };
    row("read", rd);
    row("write", wr);
    // One machine-readable line per direction, for scripts (benchmarks/aio.sh).
    if (!rd.empty()) std::printf("RESULT read %.4f\n", median(rd));
    if (!wr.empty()) std::printf("RESULT write %.4f\n", median(wr));
  } catch (const ds::Error& e) {
    std::fprintf(stderr, "ds-io-bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
