// Reads a whole event file (they are small: ~50 bytes per scalar) and unframes it.
#include "profiling/event_file_reader.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "profiling/tf_record.h"
#include "util/error.h"

namespace ds {

std::vector<TfEvent> read_tf_event_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  DS_CHECK(in.good(), IoError, path + ": cannot open the event file for reading");
  std::ostringstream text;
  text << in.rdbuf();
  const std::string bytes = text.str();
  std::vector<TfEvent> events;
  for (const std::string& record : decode_tfrecords(bytes, path)) events.push_back(decode_tf_event(record, path));
  return events;
}

std::vector<std::string> find_tf_event_files(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().filename().string().find("tfevents") != std::string::npos) {
      out.push_back(entry.path().string());
    }
  }
  DS_CHECK(!ec, IoError, dir + ": cannot list the directory: " + ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<TfScalarPoint> scalar_points(const std::vector<TfEvent>& events) {
  std::vector<TfScalarPoint> out;
  for (const TfEvent& e : events) {
    for (const TfScalar& v : e.values) out.push_back({v.tag, e.step, v.simple_value, e.wall_time});
  }
  return out;
}

}  // namespace ds
