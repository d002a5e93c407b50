// A reader of TensorBoard event files (ours, or any TFRecord file of Event records): checks both
// CRCs of every record and decodes the scalar summaries. Used by the tests and by tools that dump
// a run's metrics without TensorBoard installed.
#pragma once

#include <string>
#include <vector>

#include "profiling/tf_event.h"

namespace ds {

// Every Event in the file, in order; throws IoError for an unreadable, truncated or corrupted file.
std::vector<TfEvent> read_tf_event_file(const std::string& path);

// The event files (names containing "tfevents") directly inside `dir`, sorted by name.
std::vector<std::string> find_tf_event_files(const std::string& dir);

// One scalar as logged: the flattened view most callers want.
struct TfScalarPoint {
  std::string tag;
  int64_t step = 0;
  float value = 0.0f;
  double wall_time = 0.0;
};
std::vector<TfScalarPoint> scalar_points(const std::vector<TfEvent>& events);

}  // namespace ds
