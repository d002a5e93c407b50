// Environment forwarding (see launch_env.h).
#include "launcher/launch_env.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "util/error.h"

namespace ds::launcher {
namespace {

std::string strip_spaces(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

std::vector<std::string> names_to_forward(const std::vector<std::string>& environment) {
  static const char* const kPrefixes[] = {"DS_", "OMP_", "KMP_", "OPENBLAS_", "NCCL_", "UCX_", "MLFLOW", "PYTHON", "MV2"};
  static const char* const kNames[] = {"PATH", "LD_LIBRARY_PATH", "TMPDIR"};
  static const char* const kOwn[] = {"DS_BIND_CORES_TO_RANK", "DS_ENV_FILE", "DS_OPENBLAS_CORETYPE_CHOSEN", "DS_OPENBLAS_REEXEC"};
  std::vector<std::string> names;
  for (const std::string& entry : environment) {
    const std::string name = entry.substr(0, entry.find('='));
    if (name.empty() || std::find(std::begin(kOwn), std::end(kOwn), name) != std::end(kOwn)) continue;
    const bool wanted = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](const char* p) { return starts_with(name, p); }) ||
                        std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
    if (wanted) names.push_back(name);
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

std::vector<EnvVar> parse_deepspeed_env(const std::string& text, const std::string& source) {
  std::vector<EnvVar> vars;
  std::istringstream in(text);
  std::string raw;
  int line_no = 0;
  while (std::getline(in, raw)) {
    ++line_no;
    const std::string line = strip_spaces(raw);
    if (line.empty() || line.front() == '#') continue;
    const size_t eq = line.find('=');
    DS_CHECK(eq != std::string::npos && eq > 0, Error,
             source + ":" + std::to_string(line_no) + ": expected KEY=VALUE, got '" + line + "'");
    vars.emplace_back(strip_spaces(line.substr(0, eq)), strip_spaces(line.substr(eq + 1)));
  }
  return vars;
}

std::vector<EnvVar> read_deepspeed_env(const std::vector<std::string>& dirs) {
  const char* name = std::getenv("DS_ENV_FILE");
  std::vector<EnvVar> vars;
  for (const std::string& dir : dirs) {
    const std::string path = dir + "/" + (name != nullptr ? name : ".deepspeed_env");
    std::ifstream file(path);
    if (!file) continue;
    std::stringstream text;
    text << file.rdbuf();
    for (EnvVar& v : parse_deepspeed_env(text.str(), path)) vars.push_back(std::move(v));
  }
  return vars;
}

}  // namespace ds::launcher
