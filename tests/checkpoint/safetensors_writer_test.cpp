// SafetensorsWriter's atomicity and error reporting: nothing at the final path before commit, a
// failed commit (DS_CKPT_FAIL_AFTER_BYTES, a bad producer) leaves neither a final nor a temp file
// and an older file survives untouched; open errors name the file, the operation and strerror.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checkpoint_test_util.h"
#include "safetensors_samples.h"

namespace ds::test {
namespace {

using format::SafetensorsFile;
using format::SafetensorsWriter;
using format::StDtype;

// Sets an environment variable for one scope (tests in this binary run one at a time).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) { ::setenv(name, value.c_str(), 1); }
  ~ScopedEnv() { ::unsetenv(name_); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
};

const std::string kData(1000, 'd');

void add_two(SafetensorsWriter& w) {
  w.set_metadata("step", "7");
  w.add("a", StDtype::F32, {10, 20}, kData.data());
  w.add("b", StDtype::U8, {200}, kData.data());
}

std::string tmp_name(const std::string& path) { return path + ".tmp." + std::to_string(::getpid()); }

TEST(SafetensorsWriter, FinalFileAppearsOnlyAtTheRename) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  SafetensorsWriter w(path);
  add_two(w);
  bool checked = false;
  w.add_streamed("c", StDtype::U8, {4}, [&](const SafetensorsWriter::ChunkSink& sink) {
    // Mid-write: the bytes go to the temp file; the final name does not exist yet.
    EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors.tmp." + std::to_string(::getpid())});
    checked = true;
    sink("wxyz", 4);
  });
  EXPECT_TRUE(dir.entries().empty());
  w.commit();
  EXPECT_TRUE(checked);
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
  EXPECT_EQ(SafetensorsFile(path).tensors().size(), 3u);
  EXPECT_CONTAINS(io_error_of([&] { w.commit(); }), "commit() called twice");
}

TEST(SafetensorsWriter, UncommittedWriterLeavesNothing) {
  TempDir dir;
  {
    SafetensorsWriter w(dir.file("never.safetensors"));
    add_two(w);
  }
  EXPECT_TRUE(dir.entries().empty());
}

TEST(SafetensorsWriter, InjectedFailureLeavesNoFileAndKeepsTheOldOne) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  SafetensorsWriter probe(dir.file("probe.safetensors"));
  add_two(probe);
  probe.commit();
  const uint64_t total = read_file(dir.file("probe.safetensors")).size();
  const uint64_t header_end = SafetensorsFile(dir.file("probe.safetensors")).data_offset();
  std::filesystem::remove(dir.file("probe.safetensors"));

  for (bool old_exists : {false, true}) {
    const std::string old_image = "an older checkpoint";
    if (old_exists) write_file(path, old_image);
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{7}, header_end - 1, header_end, header_end + 5, total - 1}) {
      SCOPED_TRACE("fail after " + std::to_string(n) + " bytes, old file " + std::to_string(old_exists));
      ScopedEnv env("DS_CKPT_FAIL_AFTER_BYTES", std::to_string(n));
      SafetensorsWriter w(path);
      add_two(w);
      const std::string msg = io_error_of([&] { w.commit(); });
      EXPECT_CONTAINS(msg, tmp_name(path) + ": write failed after " + std::to_string(n) + " bytes");
      EXPECT_CONTAINS(msg, "DS_CKPT_FAIL_AFTER_BYTES=" + std::to_string(n));
      if (old_exists) {
        EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
        EXPECT_EQ(read_file(path), old_image);
      } else {
        EXPECT_TRUE(dir.entries().empty());
      }
    }
    // At or beyond the file size the hook never fires.
    for (uint64_t n : {total, total + 1}) {
      ScopedEnv env("DS_CKPT_FAIL_AFTER_BYTES", std::to_string(n));
      SafetensorsWriter w(path);
      add_two(w);
      w.commit();
      EXPECT_EQ(read_file(path).size(), total);
    }
    std::filesystem::remove(path);
  }
}

TEST(SafetensorsWriter, BadFailHookValueIsAConfigError) {
  TempDir dir;
  for (const char* v : {"abc", "-1", "12x", "99999999999999999999999"}) {
    ScopedEnv env("DS_CKPT_FAIL_AFTER_BYTES", v);
    SafetensorsWriter w(dir.file("m.safetensors"));
    add_two(w);
    try {
      w.commit();
      ADD_FAILURE() << "no error for " << v;
    } catch (const ConfigError& e) {
      EXPECT_CONTAINS(e.what(), "DS_CKPT_FAIL_AFTER_BYTES: '" + std::string(v) + "' is not a byte count");
    }
    EXPECT_TRUE(dir.entries().empty());
  }
}

TEST(SafetensorsWriter, OverwritesAnExistingFile) {
  TempDir dir;
  const std::string path = dir.file("m.safetensors");
  write_file(path, "old");
  SafetensorsWriter w(path);
  add_two(w);
  w.commit();
  EXPECT_EQ(SafetensorsFile(path).metadata().at("step"), "7");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"m.safetensors"});
}

TEST(SafetensorsWriter, MissingDirectoryAndFileAsDirectory) {
  TempDir dir;
  const std::string missing = dir.file("no/such/dir/m.safetensors");
  SafetensorsWriter w(missing);
  add_two(w);
  EXPECT_CONTAINS(io_error_of([&] { w.commit(); }),
                  tmp_name(missing) + ": open failed: No such file or directory (does the directory exist?)");
  write_file(dir.file("plain"), "x");
  SafetensorsWriter w2(dir.file("plain/m.safetensors"));
  add_two(w2);
  EXPECT_CONTAINS(io_error_of([&] { w2.commit(); }), "open failed: Not a directory");
  EXPECT_EQ(dir.entries(), std::vector<std::string>{"plain"});
}

// Root ignores directory permissions, so as root the check runs in a child that drops to
// "nobody" first; otherwise it runs here against a read-only directory.
TEST(SafetensorsWriter, UnwritableDirectory) {
  TempDir dir;
  const std::string sub = dir.file("ro");
  ASSERT_EQ(::mkdir(sub.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  const std::string path = sub + "/m.safetensors";
  auto attempt = [&] {
    SafetensorsWriter w(path);
    add_two(w);
    return io_error_of([&] { w.commit(); });
  };
  std::string msg;
  if (::geteuid() != 0) {
    msg = attempt();
  } else {
    int fds[2];
    ASSERT_EQ(::pipe(fds), 0);
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(fds[0]);
      std::string m = (::setgid(65534) == 0 && ::setuid(65534) == 0) ? attempt() : "setuid failed";
      if (::write(fds[1], m.data(), m.size()) < 0) ::_exit(2);
      ::_exit(0);
    }
    ::close(fds[1]);
    char buf[1024];
    ssize_t got;
    while ((got = ::read(fds[0], buf, sizeof(buf))) > 0) msg.append(buf, static_cast<size_t>(got));
    ::close(fds[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    if (msg == "setuid failed") GTEST_SKIP() << "cannot drop root privileges here";
  }
  EXPECT_CONTAINS(msg, path + ".tmp.");
  EXPECT_CONTAINS(msg, ": open failed: Permission denied (check the permissions of the file and its directory)");
  EXPECT_TRUE(std::filesystem::is_empty(sub));
}

}  // namespace
}  // namespace ds::test
