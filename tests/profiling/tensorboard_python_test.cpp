// Our event files decoded by the protobuf library (Debian's python3-protobuf) through a
// hand-written descriptor of TensorFlow's Event message (decode_tfevents.py): the CRCs check out
// in an independent implementation, protobuf parses every record, re-serializing gives our exact
// bytes, and the tags, steps and values are the ones we logged. Skipped without python3-protobuf.
#include <gtest/gtest.h>

#include <sstream>

#include "profiling/event_file_reader.h"
#include "profiling/python_text.h"
#include "profiling/tensorboard_monitor.h"
#include "profiling_test_util.h"

namespace ds::test {
namespace {

TEST(TensorBoardPython, ProtobufDecodesOurEventFile) {
  if (!python_has("google.protobuf")) GTEST_SKIP() << kPython << " has no google.protobuf (Debian: python3-protobuf)";
  TempDir dir;
  TensorBoardConfig c;
  c.enabled = true;
  c.output_path = dir.path();
  c.job_name = "job";
  TensorBoardMonitor m(c);
  m.write_events({{"Train/Samples/train_loss", 2.3456, 0}});
  m.write_events({{"Train/Samples/lr", 6e-4, 16}, {"Train/Samples/loss_scale", 32768, 16, ValueKind::Int}});
  m.write_events({{"Train/Samples/elapsed_time_ms_forward", 123.5, int64_t{1} << 33}, {"neg step", -1.0, -3}});

  const auto [rc, out] = run_python_script(dir, "decode_tfevents.py", m.file_path());
  ASSERT_EQ(rc, 0) << out;

  // Expected lines from our own reader, with Python's repr for the numbers.
  std::string want;
  for (const TfEvent& e : read_tf_event_file(m.file_path())) {
    std::string values;
    for (const TfScalar& v : e.values) {
      values += (values.empty() ? "" : " ") + v.tag + "=" + python_float_repr(v.simple_value);
    }
    want += "EVENT " + python_float_repr(e.wall_time) + " " + std::to_string(e.step) + " " +
            (e.file_version.empty() ? "-" : e.file_version) + " " + values + "\n";
  }
  want += "OK 6\n";
  EXPECT_EQ(out, want);
  EXPECT_CONTAINS(out, " 0 - Train/Samples/train_loss=2.345599889755249\n");
  EXPECT_CONTAINS(out, " 16 - Train/Samples/lr=0.0006000000284984708\n");
  EXPECT_CONTAINS(out, " 8589934592 - Train/Samples/elapsed_time_ms_forward=123.5\n");
  EXPECT_CONTAINS(out, " -3 - neg step=-1.0\n");
}

}  // namespace
}  // namespace ds::test
