// crc32c: the checksum of checkpoint files (util/crc32c.h) in GB/s on one core: the SSE4.2 path
// (three interleaved crc32 streams) against the portable slicing-by-8 tables, and against memcpy of
// the same buffer (what the save path's write(2) copy costs anyway). Medians of interleaved rounds.
// Then what the checksums cost a checkpoint file of --file-mib MiB (GPT-2 small's rank file is
// ~1.4 GiB) written and read through the checkpoint layer: the CRC share of a commit (the same
// bytes checksummed alone) and a read of every tensor verified vs unverified (page cache warm).
#include <CLI/CLI.hpp>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "format/safetensors.h"
#include "util/crc32c.h"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

template <class F>
double gbps(size_t bytes, F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return double(bytes) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / 1e9;
}

// One checkpoint-like file (16 MiB fp32 tensors): commit time and the CRC share of it; full reads
// verified and unverified.
void file_costs(const std::string& dir, size_t mib, int rounds) {
  namespace ck = ds::format;
  const size_t per = 16u << 20, count = std::max<size_t>(1, (mib << 20) / per);
  std::vector<float> data(per / sizeof(float));
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i % 1000) * 0.001f;
  const std::string path = dir + "/crc32c_bench." + std::to_string(::getpid()) + ".safetensors";
  std::vector<double> commit_s, crc_s, plain_s, verified_s;
  ck::FileChecksums sums;
  std::vector<float> dst(data.size());
  for (int r = 0; r < rounds; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    ck::SafetensorsWriter w(path);
    for (size_t k = 0; k < count; ++k) w.add(std::to_string(k), ck::StDtype::F32, {int64_t(data.size())}, data.data());
    w.commit();
    sums = w.checksums();
    commit_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    t0 = std::chrono::steady_clock::now();
    for (size_t k = 0; k < count; ++k) {
      ck::ChunkedCrc c(ck::kChecksumChunkBytes);
      c.update(data.data(), per);
      (void)c.finish();
    }
    crc_s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    for (int verify = 0; verify < 2; ++verify) {
      t0 = std::chrono::steady_clock::now();
      ck::SafetensorsFile f(path, verify ? &sums : nullptr);
      for (const auto& t : f.tensors()) f.read(t, dst.data(), t.nbytes());
      (verify ? verified_s : plain_s).push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
  }
  ::unlink(path.c_str());
  const double gb = double(count * per) / 1e9;
  std::printf("\ncheckpoint file of %.2f GB (%zu tensors of 16 MiB), medians of %d rounds:\n", gb, count, rounds);
  std::printf("  save: commit (write + fsync + CRC) %.3f s, of which CRC %.3f s (%.1f%%)\n", median(commit_s),
              median(crc_s), 100 * median(crc_s) / median(commit_s));
  std::printf("  load: read unverified %.3f s, verified %.3f s (+%.1f%%)\n", median(plain_s), median(verified_s),
              100 * (median(verified_s) / median(plain_s) - 1));
  std::printf("BENCH checkpoint_verified_read ours=%.4g ref=%.4g unit=s ratio=%.3f\n", median(verified_s),
              median(plain_s), median(verified_s) / median(plain_s));
}

}  // namespace

int main(int argc, char** argv) {
  size_t mib = 256;
  int rounds = 7;
  CLI::App app{"crc32c: CRC-32C throughput (hardware vs portable vs memcpy)"};
  app.add_option("--mib", mib, "buffer size in MiB")->capture_default_str();
  app.add_option("--rounds", rounds, "rounds (medians are reported)")->capture_default_str();
  size_t file_mib = 1024;
  std::string dir = "/tmp";
  app.add_option("--file-mib", file_mib, "checkpoint file to write and read (0: skip)")->capture_default_str();
  app.add_option("--dir", dir, "where that file goes")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  const size_t n = mib << 20;
  std::vector<unsigned char> buf(n), dst(n);
  std::mt19937_64 gen(1);
  for (size_t i = 0; i < n; i += 8) {
    const uint64_t v = gen();
    std::memcpy(buf.data() + i, &v, std::min<size_t>(8, n - i));
  }
  std::memset(dst.data(), 0, n);
  std::vector<double> fast, portable, copy;
  volatile uint32_t sink = 0;
  for (int r = 0; r < rounds; ++r) {
    fast.push_back(gbps(n, [&] { sink = ds::crc32c(buf.data(), n); }));
    portable.push_back(gbps(n, [&] { sink = ds::crc32c_portable(buf.data(), n); }));
    copy.push_back(gbps(n, [&] { std::memcpy(dst.data(), buf.data(), n); }));
  }
  (void)sink;
  std::printf("%-28s %8s\n", "variant", "GB/s");
  std::printf("%-28s %8.2f\n", ds::crc32c_is_hardware() ? "crc32c (SSE4.2, 3 streams)" : "crc32c (portable)",
              median(fast));
  std::printf("%-28s %8.2f\n", "crc32c_portable (slice-by-8)", median(portable));
  std::printf("%-28s %8.2f\n", "memcpy", median(copy));
  std::printf("BENCH crc32c ours=%.4g ref=%.4g unit=GB_per_s ratio=%.3f\n", median(fast), median(portable),
              median(fast) / median(portable));
  if (file_mib > 0) file_costs(dir, file_mib, rounds);
  return 0;
}
