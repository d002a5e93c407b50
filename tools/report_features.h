// ds-report's op table, asked of the components themselves each time it runs, so it cannot go
// stale (issue 22, item 11: a hand-written table said "zero stages 1-3 [NO] not built yet" long
// after they worked). Engines and ZeRO stages are probed by one real training step of a tiny GPT-2;
// io_uring by setting up a real ring; the rest from what the libraries compiled in and enumerate.
#pragma once

#include <string>
#include <vector>

namespace ds::tools {

struct FeatureRow {
  std::string name;
  bool installed = false;  // works in this build on this machine, as probed just now
  std::string note;        // what was probed, or why it does not work
};

std::vector<FeatureRow> probe_features();

}  // namespace ds::tools
