// Hostfile parsing: DeepSpeed's test_run.py cases (test_hostfile_good / test_hostfiles_bad), plus
// the file:line our errors add and the missing-file fallback.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "launcher/hostfile.h"
#include "util/error.h"

namespace ds::launcher {
namespace {

std::string error_of(const std::string& text) {
  try {
    parse_hostfile(text, "hf");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(LauncherHostfile, GoodWithBlankLinesAndComments) {
  const std::string text = R"(
    worker-1 slots=2
    worker-2 slots=2

    localhost slots=1
    123.23.12.10 slots=2

    #worker-1 slots=3
    # this is a comment

    )";
  const ResourcePool pool = parse_hostfile(text, "hf");
  const ResourcePool expected = {{"worker-1", 2}, {"worker-2", 2}, {"localhost", 1}, {"123.23.12.10", 2}};
  EXPECT_EQ(pool, expected);
}

TEST(LauncherHostfile, TrailingTextAfterSlotsIsIgnoredLikeDeepSpeed) {
  EXPECT_EQ(parse_hostfile("node\tslots=8 max_slots=16\n", "hf"), (ResourcePool{{"node", 8}}));
}

TEST(LauncherHostfile, DuplicateHostNamesFileAndLine) {
  const std::string e = error_of("\nworker-1 slots=2\nworker-2 slots=1\nworker-1 slots=1\n");
  EXPECT_NE(e.find("hf:4: Hostfile contains multiple entries for worker-1"), std::string::npos) << e;
}

TEST(LauncherHostfile, ZeroSlotsAreAnErrorNamingTheLine) {
  const std::string e = error_of("worker-0 slots=2\nworker-1 slots=0\n");
  EXPECT_NE(e.find("hf:2: Hostfile gives worker-1 0 slots"), std::string::npos) << e;
}

TEST(LauncherHostfile, BadEntries) {
  EXPECT_NE(error_of("\n    this is bad slots=1\n").find("hf:2: Hostfile contains a bad entry: 'this is bad slots=1'"),
            std::string::npos);
  EXPECT_NE(error_of("missingslots\n").find("hf:1: Hostfile contains a bad entry: 'missingslots'"), std::string::npos);
  EXPECT_NE(error_of("worker slots=\n").find("hf:1:"), std::string::npos);
  EXPECT_NE(error_of("worker slots=x\n").find("hf:1:"), std::string::npos);
  EXPECT_NE(error_of("worker  slot=2\n").find("hf:1:"), std::string::npos);
  // mix of good and bad: the first bad line is reported
  EXPECT_NE(error_of("worker-1 slots=2\nthis is bad slots=1\nworker-2 slots=4\nmissingslots\n").find("hf:2:"),
            std::string::npos);
}

TEST(LauncherHostfile, EmptyIsAnError) {
  EXPECT_NE(error_of("\n    \n").find("hf: Hostfile is empty or not formatted correctly"), std::string::npos);
  EXPECT_NE(error_of("# only a comment\n").find("Hostfile is empty"), std::string::npos);
}

TEST(LauncherHostfile, ReadFromDiskOrNulloptWhenMissing) {
  EXPECT_FALSE(read_hostfile("/nonexistent/ds-run/hostfile").has_value());
  const auto path = std::filesystem::temp_directory_path() / ("ds_hostfile_test_" + std::to_string(::getpid()));
  std::ofstream(path) << "a slots=1\nb slots=3\n";
  const auto pool = read_hostfile(path.string());
  ASSERT_TRUE(pool.has_value());
  EXPECT_EQ(*pool, (ResourcePool{{"a", 1}, {"b", 3}}));
  std::ofstream(path) << "a slots=1\na slots=3\n";
  try {
    read_hostfile(path.string());
    FAIL() << "duplicate host accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path.string() + ":2:"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace ds::launcher
