// Every I/O failure is a ds::IoError naming the operation, the file, the offset/length and
// strerror: missing path, not a directory, not writable, disk full (via RLIMIT_FSIZE → EFBIG,
// which needs no root mounts), short read of a truncated file. Both backends.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "aio/aio_engine.h"
#include "aio/uring_backend.h"
#include "aio_test_util.h"
#include "util/error.h"

namespace ds::aio {
namespace {

class Faults : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::Uring && !uring_compiled_in()) GTEST_SKIP() << "no liburing";
  }
  AioOptions options() const {
    AioOptions o;
    o.backend = GetParam();
    o.block_size = 256 * 1024;
    o.queue_depth = 4;
    return o;
  }
};

// The IoError text of running `f`, or "" when it did not throw one.
template <typename F>
std::string io_error_of(F&& f) {
  try {
    f();
  } catch (const IoError& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_HAS(text, needle) EXPECT_NE((text).find(needle), std::string::npos) << (text)

TEST_P(Faults, MissingDirectory) {
  test::ScratchDir dir;
  AioEngine e(options());
  AlignedBuffer b(8192);
  const std::string path = dir.file("no/such/dir/f.swp");
  const std::string w = io_error_of([&] { e.write(path, b.data(), 8192, 4096); });
  EXPECT_HAS(w, "aio write");
  EXPECT_HAS(w, path);
  EXPECT_HAS(w, "offset 4096, 8192 bytes");
  EXPECT_HAS(w, "No such file or directory");
  const std::string r = io_error_of([&] { e.read(dir.file("absent.swp"), b.data(), 100); });
  EXPECT_HAS(r, "aio read");
  EXPECT_HAS(r, "absent.swp");
  EXPECT_HAS(r, "No such file or directory");
}

TEST_P(Faults, NotADirectory) {
  test::ScratchDir dir;
  AioEngine e(options());
  AlignedBuffer b(4096);
  e.write(dir.file("plain"), b.data(), 4096);
  const std::string w = io_error_of([&] { e.write(dir.file("plain/f.swp"), b.data(), 4096); });
  EXPECT_HAS(w, "plain/f.swp");
  EXPECT_HAS(w, "Not a directory");
}

TEST_P(Faults, NotWritable) {
  test::ScratchDir dir;
  const std::string ro = dir.file("readonly");
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  ::chmod(dir.path().c_str(), 0755);
  const AioOptions opts = options();
  // root ignores permission bits: check as an unprivileged user in a child.
  const int rc = test::run_in_child([&] {
    if (::geteuid() == 0 && ::setuid(65534) != 0) return 10;
    AioEngine e(opts);
    AlignedBuffer b(4096);
    const std::string w = io_error_of([&] { e.write(ro + "/f.swp", b.data(), 4096); });
    if (w.find("Permission denied") == std::string::npos) return 11;
    if (w.find(ro + "/f.swp") == std::string::npos) return 12;
    return 0;
  });
  EXPECT_EQ(rc, 0);
}

// RLIMIT_FSIZE makes writes past the limit fail with EFBIG (SIGXFSZ ignored), exactly the path a
// full disk's ENOSPC takes through the engine. Restored at scope end.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
    rlimit l = old_;
    l.rlim_cur = bytes;
    ok_ = ::setrlimit(RLIMIT_FSIZE, &l) == 0;
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }
  bool ok() const { return ok_; }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
  bool ok_ = false;
};

TEST_P(Faults, DiskFullIsAnIoErrorAtWait) {
  test::ScratchDir dir;
  AioEngine e(options());
  constexpr int64_t kBytes = 4 << 20;
  AlignedBuffer b(kBytes);
  const std::string path = dir.file("big.swp");
  std::string w;
  {
    FileSizeLimit limit(1 << 20);
    ASSERT_TRUE(limit.ok());
    IoHandle h = e.submit_write(path, b.data(), kBytes);  // opening works; the transfer fails
    w = io_error_of([&] { e.wait(h); });
  }
  EXPECT_HAS(w, "aio write");
  EXPECT_HAS(w, path);
  EXPECT_HAS(w, "File too large");
  EXPECT_HAS(w, "disk is full");
  EXPECT_HAS(w, "bytes)");
  EXPECT_EQ(e.in_flight(), 0);
  // The engine stays usable after a failure.
  AlignedBuffer small(4096);
  e.write(dir.file("after.swp"), small.data(), 4096);
}

TEST_P(Faults, ShortReadOfTruncatedFile) {
  test::ScratchDir dir;
  AioEngine e(options());
  constexpr int64_t kBytes = 1 << 20;
  AlignedBuffer b(kBytes);
  const std::string path = dir.file("cut.swp");
  e.write(path, b.data(), kBytes);
  ASSERT_EQ(::truncate(path.c_str(), 300000), 0);
  const std::string r = io_error_of([&] { e.read(path, b.data(), kBytes); });
  EXPECT_HAS(r, "aio read");
  EXPECT_HAS(r, path);
  EXPECT_HAS(r, "short read");
  EXPECT_HAS(r, "ends at byte 300000");
  // Reading past the end of an intact file is the same error.
  const std::string past = io_error_of([&] { e.read(path, b.data(), 4096, 1 << 20); });
  EXPECT_HAS(past, "short read");
}

TEST_P(Faults, WaitAllReportsTheFirstFailureAfterWaitingEverything) {
  test::ScratchDir dir;
  AioEngine e(options());
  AlignedBuffer good(1 << 20), sink(1 << 20), small(4096);
  e.write(dir.file("short"), small.data(), 4096);
  e.submit_write(dir.file("ok1"), good.data(), 1 << 20);
  e.submit_read(dir.file("short"), sink.data(), 1 << 20);  // short read
  const std::string r = io_error_of([&] { e.wait_all(); });
  EXPECT_HAS(r, "short read");
  EXPECT_EQ(e.in_flight(), 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Faults, ::testing::Values(Backend::Uring, Backend::Threads),
                         [](const auto& info) { return to_string(info.param); });

}  // namespace
}  // namespace ds::aio
