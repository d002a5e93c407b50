// The TensorBoard writer and reader: a hand-checked Event encoding, then files written by
// TensorBoardMonitor read back by our reader (both CRCs checked) with every tag, value and step.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>

#include "profiling/event_file_reader.h"
#include "profiling/tensorboard_monitor.h"
#include "profiling/tf_event.h"
#include "profiling/tf_record.h"
#include "profiling_test_util.h"
#include "util/error.h"

namespace ds::test {
namespace {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardConfig config_in(const TempDir& dir) {
  TensorBoardConfig c;
  c.enabled = true;
  c.output_path = dir.file("tb");
  c.job_name = "job";
  return c;
}

TEST(TfEvent, EncodingMatchesTheProtobufWireFormatByHand) {
  TfEvent e;
  e.wall_time = 1.5;
  e.step = 3;
  e.values.push_back({"a", 0.5f});
  const std::string want =
      std::string("\x09\x00\x00\x00\x00\x00\x00\xf8\x3f", 9) +  // field 1, fixed64: 1.5
      std::string("\x10\x03", 2) +                              // field 2, varint: 3
      std::string("\x2a\x0a\x0a\x08\x0a\x01" "a" "\x15\x00\x00\x00\x3f", 12);  // summary{value{tag, simple_value}}
  EXPECT_EQ(encode_tf_event(e), want);

  TfEvent first;
  first.wall_time = 2.0;
  first.file_version = "brain.Event:2";
  EXPECT_EQ(encode_tf_event(first), std::string("\x09\0\0\0\0\0\0\0\x40\x1a\x0d" "brain.Event:2", 24));
}

TEST(TfEvent, RoundTripsStepsAndValues) {
  for (int64_t step : {int64_t{0}, int64_t{1}, int64_t{127}, int64_t{128}, int64_t{1} << 40, int64_t{-5}}) {
    TfEvent e;
    e.wall_time = 1700000000.25;
    e.step = step;
    e.values = {{"Train/Samples/lr", 1e-4f}, {"", -0.0f}, {"x", std::numeric_limits<float>::infinity()}};
    const TfEvent d = decode_tf_event(encode_tf_event(e), "mem");
    EXPECT_EQ(d.step, step);
    EXPECT_EQ(d.wall_time, e.wall_time);
    ASSERT_EQ(d.values.size(), 3u);
    EXPECT_EQ(d.values[0].tag, "Train/Samples/lr");
    EXPECT_EQ(d.values[0].simple_value, 1e-4f);
    EXPECT_TRUE(std::signbit(d.values[1].simple_value));
    EXPECT_TRUE(std::isinf(d.values[2].simple_value));
  }
}

TEST(TfEvent, SkipsFieldsItDoesNotKnow) {
  // Value{node_name(7)="n", tag="t", metadata(9)={}, simple_value=1.0}, then Event.source_metadata(10).
  const std::string value = std::string("\x3a\x01n\x0a\x01t\x4a\x00\x15\x00\x00\x80\x3f", 13);
  const std::string event = "\x10\x07\x2a" + std::string(1, static_cast<char>(value.size() + 2)) + "\x0a" +
                            std::string(1, static_cast<char>(value.size())) + value + std::string("\x52\x00", 2);
  const TfEvent d = decode_tf_event(event, "mem");
  EXPECT_EQ(d.step, 7);
  ASSERT_EQ(d.values.size(), 1u);
  EXPECT_EQ(d.values[0].tag, "t");
  EXPECT_EQ(d.values[0].simple_value, 1.0f);
  EXPECT_THROW(decode_tf_event(std::string("\x2a\x05\x0a", 3), "mem"), IoError);  // truncated
}

TEST(TensorBoardMonitor, WritesWhatOurReaderReadsBack) {
  TempDir dir;
  const double before = now_seconds();
  TensorBoardMonitor m(config_in(dir));
  const std::vector<MonitorEvent> step1 = {{"Train/Samples/train_loss", 2.25, 0}};
  const std::vector<MonitorEvent> step2 = {{"Train/Samples/lr", 0.001, 8},
                                           {"Train/Samples/loss_scale", 65536, 8, ValueKind::Int},
                                           {"Train/Samples/elapsed_time_ms_step", 3.75, 8}};
  m.write_events(step1);
  m.write_events(step2);
  m.write_events({});

  // Read while the writer is still open: every write_events already reached the file.
  ASSERT_EQ(find_tf_event_files(dir.file("tb") + "/job"), std::vector<std::string>{m.file_path()});
  const std::vector<TfEvent> events = read_tf_event_file(m.file_path());
  ASSERT_EQ(events.size(), 5u);
  EXPECT_EQ(events[0].file_version, "brain.Event:2");
  EXPECT_FALSE(events[0].has_summary);
  for (const TfEvent& e : events) {
    EXPECT_GE(e.wall_time, std::floor(before));
    EXPECT_LE(e.wall_time, now_seconds() + 1);
  }
  const auto points = scalar_points(events);
  ASSERT_EQ(points.size(), 4u);
  std::vector<MonitorEvent> all = step1;
  all.insert(all.end(), step2.begin(), step2.end());
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(points[i].tag, all[i].tag);
    EXPECT_EQ(points[i].step, all[i].step);
    EXPECT_EQ(points[i].value, static_cast<float>(all[i].value));
  }
}

TEST(TensorBoardMonitor, FileIsNamedLikeSummaryWriter) {
  TempDir dir;
  const auto t0 = static_cast<long long>(now_seconds());
  TensorBoardMonitor a(config_in(dir)), b(config_in(dir));
  const std::string name = a.file_path().substr(a.file_path().rfind('/') + 1);
  // events.out.tfevents.<%010d seconds>.<hostname>.<pid>.<n>
  const std::string prefix = "events.out.tfevents.";
  ASSERT_EQ(name.rfind(prefix, 0), 0u) << name;
  const std::string stamp = name.substr(prefix.size(), 10);
  EXPECT_GE(std::stoll(stamp), t0);
  EXPECT_EQ(name.substr(prefix.size() + 10), "." + host_name() + "." + std::to_string(getpid()) + ".0");
  EXPECT_EQ(b.file_path().substr(b.file_path().size() - 2), ".1");  // a second writer never shares a file
  EXPECT_EQ(a.log_dir(), dir.file("tb") + "/job");
}

TEST(TensorBoardMonitor, CorruptionIsDetected) {
  TempDir dir;
  std::string path;
  {
    TensorBoardMonitor m(config_in(dir));
    m.write_events({{"loss", 1.0, 1}});
    path = m.file_path();
  }
  std::string bytes = read_file(path);
  bytes[bytes.size() - 6] ^= 0x40;  // inside the last record's data
  write_file(path, bytes);
  try {
    read_tf_event_file(path);
    FAIL() << "expected IoError";
  } catch (const IoError& e) {
    EXPECT_CONTAINS(e.what(), path + ": bad data CRC");
  }
  EXPECT_THROW(read_tf_event_file(dir.file("missing")), IoError);
}

}  // namespace
}  // namespace ds::test
