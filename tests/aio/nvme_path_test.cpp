// nvme_path checks: ConfigErrors that name the config key and say what is wrong, with numbers.
#include "aio/nvme_path.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "aio_test_util.h"
#include "util/error.h"

namespace ds::aio {
namespace {

const std::string kKey = "zero_optimization.offload_optimizer.nvme_path";

std::string config_error_of(const std::function<void()>& f, std::string* path = nullptr) {
  try {
    f();
  } catch (const ConfigError& e) {
    if (path) *path = e.path();
    return e.what();
  }
  return "";
}

TEST(NvmePath, AcceptsAWritableDirectory) {
  test::ScratchDir dir;
  EXPECT_NO_THROW(validate_nvme_path(dir.path(), kKey));
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));  // the probe file is gone
}

TEST(NvmePath, MissingPathNamesTheKey) {
  std::string path;
  const std::string m = config_error_of([] { validate_nvme_path("/no/such/nvme", kKey); }, &path);
  EXPECT_EQ(path, kKey);
  EXPECT_NE(m.find("\"/no/such/nvme\" does not exist"), std::string::npos) << m;
}

TEST(NvmePath, FileIsNotADirectory) {
  test::ScratchDir dir;
  std::ofstream(dir.file("f")) << "x";
  const std::string m = config_error_of([&] { validate_nvme_path(dir.file("f"), kKey); });
  EXPECT_NE(m.find("is not a directory"), std::string::npos) << m;
}

TEST(NvmePath, NotWritable) {
  test::ScratchDir dir;
  const std::string ro = dir.file("ro");
  ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
  ::chmod(dir.path().c_str(), 0755);
  const int rc = test::run_in_child([&] {
    if (::geteuid() == 0 && ::setuid(65534) != 0) return 10;
    const std::string m = config_error_of([&] { validate_nvme_path(ro, kKey); });
    return m.find(kKey + ": \"" + ro + "\" is not writable: Permission denied") != std::string::npos ? 0 : 11;
  });
  EXPECT_EQ(rc, 0);
}

TEST(NvmePath, FreeSpaceMessageHasTheNumbers) {
  test::ScratchDir dir;
  const DiskSpace d = disk_space(dir.path());
  EXPECT_GT(d.total_bytes, 0u);
  EXPECT_NO_THROW(check_free_space(dir.path(), 4096, kKey));
  const uint64_t need = d.free_bytes + (uint64_t{1} << 40);
  std::string path;
  const std::string m = config_error_of([&] { check_free_space(dir.path(), need, kKey); }, &path);
  EXPECT_EQ(path, kKey);
  EXPECT_NE(m.find("needs " + format_bytes(need) + " on " + dir.path() + ", "), std::string::npos) << m;
  EXPECT_NE(m.find(" free"), std::string::npos) << m;
}

TEST(NvmePath, FormatBytes) {
  EXPECT_EQ(format_bytes(uint64_t{58} * (1ull << 30) + (1ull << 28)), "58.2 GiB");
  EXPECT_EQ(format_bytes(41ull << 30), "41.0 GiB");
  EXPECT_EQ(format_bytes(3ull << 20), "3.0 MiB");
  EXPECT_EQ(format_bytes(12), "12 bytes");
}

}  // namespace
}  // namespace ds::aio
