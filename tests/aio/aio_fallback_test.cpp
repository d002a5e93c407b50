// The fallbacks: files on tmpfs go buffered through the thread pool (one warning), a kernel that
// refuses io_uring (simulated with a seccomp filter, as Docker's default profile does) gives the
// thread pool (one warning), and DS_AIO_BACKEND overrides the choice.
#include <gtest/gtest.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "aio/aio_engine.h"
#include "aio/uring_backend.h"
#include "aio_test_util.h"
#include "util/error.h"

namespace ds::aio {
namespace {

bool round_trip(AioEngine& e, const std::string& path, int64_t n) {
  AlignedBuffer a(n), b(n);
  test::fill_pattern(a.data(), n, 7);
  e.write(path, a.data(), n);
  e.read(path, b.data(), n);
  return std::memcmp(a.data(), b.data(), static_cast<size_t>(n)) == 0;
}

TEST(AioFallback, TmpfsFilesAreBufferedWithOneWarning) {
  if (!std::filesystem::is_directory("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  test::ScratchDir dir("/dev/shm");
  ASSERT_TRUE(dir.ok());
  test::LogCapture log;
  AioOptions o;
  o.backend = Backend::Auto;
  AioEngine e(o);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(round_trip(e, dir.file("t" + std::to_string(i)), (1 << 20) + 4097));
  EXPECT_NE(e.buffered_reason().find("tmpfs"), std::string::npos) << e.buffered_reason();
  EXPECT_EQ(log.count("O_DIRECT"), 1) << log.text();  // once per engine, not per file
  EXPECT_EQ(log.count("tmpfs"), 1) << log.text();
}

TEST(AioFallback, RealDiskFilesAreDirect) {
  test::ScratchDir dir;
  test::LogCapture log;
  AioEngine e(AioOptions{});
  EXPECT_TRUE(round_trip(e, dir.file("d"), 12345));
  if (e.buffered_reason().empty()) {
    EXPECT_EQ(log.count("O_DIRECT"), 0);
  }
}

// Installs a seccomp filter that fails io_uring_setup with EPERM (this process only).
bool block_io_uring_setup() {
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  struct sock_fprog prog = {static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  return ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0 &&
         ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0;
}

TEST(AioFallback, RefusedIoUringFallsBackToThreadsWithOneWarning) {
  if (!uring_compiled_in()) GTEST_SKIP() << "built without liburing";
  test::ScratchDir dir;
  const int rc = test::run_in_child([&] {
    if (!block_io_uring_setup()) return 10;
    ::unsetenv("DS_AIO_BACKEND");
    test::LogCapture log;
    AioEngine e(AioOptions{});  // Auto
    if (e.backend() != Backend::Threads) return 11;
    if (e.uring_unavailable_reason().find("Operation not permitted") == std::string::npos) return 12;
    if (log.count("io_uring is unavailable") != 1) return 13;
    if (!round_trip(e, dir.file("c"), (3 << 20) + 5)) return 14;
    AioOptions forced;
    forced.backend = Backend::Uring;  // asking for io_uring explicitly is an error, not a fallback
    try {
      AioEngine f(forced);
      return 15;
    } catch (const NotSupported& ex) {
      if (std::string(ex.what()).find("io_uring") == std::string::npos) return 16;
    }
    return 0;
  });
  EXPECT_EQ(rc, 0) << "child check " << rc << " failed (see the return codes above)";
}

TEST(AioFallback, EnvironmentOverridesAuto) {
  const char* old = std::getenv("DS_AIO_BACKEND");
  const std::string saved = old ? old : "";
  ::setenv("DS_AIO_BACKEND", "threads", 1);
  {
    AioEngine e(AioOptions{});
    EXPECT_EQ(e.backend(), Backend::Threads);
    AioOptions explicit_uring;
    explicit_uring.backend = Backend::Uring;  // an explicit choice wins over the environment
    if (uring_compiled_in()) {
      EXPECT_EQ(AioEngine(explicit_uring).backend(), Backend::Uring);
    }
  }
  ::setenv("DS_AIO_BACKEND", "bogus", 1);
  EXPECT_THROW(AioEngine{AioOptions{}}, ConfigError);
  if (uring_compiled_in()) {
    ::setenv("DS_AIO_BACKEND", "uring", 1);
    EXPECT_EQ(AioEngine(AioOptions{}).backend(), Backend::Uring);
  }
  if (old) {
    ::setenv("DS_AIO_BACKEND", saved.c_str(), 1);
  } else {
    ::unsetenv("DS_AIO_BACKEND");
  }
}

}  // namespace
}  // namespace ds::aio
