// Rank exit records and the worst-code rule (see exit_status.h).
#include "launcher/exit_status.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

namespace ds::launcher {

bool write_rank_exit(const std::string& dir, const RankExit& exit) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/rank." + std::to_string(exit.rank);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) return false;
    out << (exit.signaled ? "signal " : "exit ") << exit.code << "\n";
    if (!out) return false;
  }
  std::filesystem::rename(tmp, path, ec);  // readers never see half a record
  return !ec;
}

std::vector<RankExit> read_rank_exits(const std::string& dir) {
  std::vector<RankExit> ranks;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank.", 0) != 0 || name.find(".tmp") != std::string::npos) continue;
    std::ifstream in(entry.path());
    std::string kind;
    RankExit r;
    if (!(in >> kind >> r.code) || (kind != "exit" && kind != "signal")) continue;
    try {
      r.rank = std::stoi(name.substr(5));
    } catch (const std::exception&) {
      continue;
    }
    r.signaled = kind == "signal";
    ranks.push_back(r);
  }
  std::sort(ranks.begin(), ranks.end(), [](const RankExit& a, const RankExit& b) { return a.rank < b.rank; });
  return ranks;
}

int worst_exit_code(const std::vector<RankExit>& ranks, int mpirun_code) {
  int worst_exit = 0, worst_signal = 0;
  for (const RankExit& r : ranks) {
    if (r.signaled) worst_signal = std::max(worst_signal, 128 + r.code);
    else worst_exit = std::max(worst_exit, r.code);
  }
  if (worst_exit != 0) return worst_exit;
  if (mpirun_code != 0) return mpirun_code;
  return worst_signal;
}

std::string describe_rank_exits(const std::vector<RankExit>& ranks) {
  std::string out;
  for (const RankExit& r : ranks) {
    if (!r.signaled && r.code == 0) continue;
    if (!out.empty()) out += "; ";
    out += "rank " + std::to_string(r.rank) + (r.signaled ? " killed by signal " : " exited with ") +
           std::to_string(r.code);
  }
  return out;
}

}  // namespace ds::launcher
