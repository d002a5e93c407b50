// The tools' OpenBLAS core at start (issue 15 item 1), as a user meets it: ds-report started from a
// generic core ends up running the best one (through its re-exec), a user's OPENBLAS_CORETYPE is
// kept and named, and ds-run's ranks get the best core in their environment.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <string>

#include "util/blas_core.h"

namespace ds {
namespace {

std::string tool(const std::string& name) { return std::string(DS_BINARY_DIR) + "/tools/" + name; }

// stdout and stderr of `cmd` (through /bin/sh), started without the caller's OpenBLAS variables.
std::string run(const std::string& env, const std::string& cmd) {
  const std::string full = "env -u OPENBLAS_CORETYPE -u DS_OPENBLAS_CORETYPE_CHOSEN -u DS_OPENBLAS_REEXEC " + env +
                           " timeout -k 5 120 " + cmd + " 2>&1";
  std::string out;
  FILE* p = popen(full.c_str(), "r");
  if (p == nullptr) return out;
  std::array<char, 4096> buf{};
  size_t n = 0;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  pclose(p);
  return out;
}

// `ds-report --blas-core`: the core it runs after its own choice at start (its last line; a line
// on stderr, if any, comes first).
std::string running_core(const std::string& env) {
  std::string out = run(env, tool("ds-report") + " --blas-core");
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out.substr(out.rfind('\n') == std::string::npos ? 0 : out.rfind('\n') + 1);
}

// The core name on ds-report's "blas core ..... <core> (...)" row ("" when there is none).
std::string reported_core(const std::string& report) {
  const size_t row = report.find("blas core ");
  if (row == std::string::npos) return "";
  const size_t start = report.find_first_not_of(". ", row + 10);
  return report.substr(start, report.find(' ', start) - start);
}

// The best core here, or "" (then the tests have nothing to show: no OpenBLAS or no AVX2).
std::string best_core_here() {
  if (!probe_blas_library().is_openblas()) return "";
  return best_openblas_core(detect_cpu_features());
}

TEST(BlasCoreTools, ReportStartedOnAGenericCoreRunsTheBestOne) {
  const std::string best = best_core_here();
  if (best.empty()) GTEST_SKIP() << "needs OpenBLAS and a CPU with AVX2";
  // Prescott chosen by a ds program (not the user): what OpenBLAS 0.3.21 itself picks on Intel 6/207.
  EXPECT_EQ(running_core("OPENBLAS_CORETYPE=Prescott DS_OPENBLAS_CORETYPE_CHOSEN=Prescott"), best);
  // Out of the box (no variable at all) it runs the best core too, or a newer one OpenBLAS knows.
  const std::string plain = running_core("");
  EXPECT_GE(openblas_core_tier(plain), openblas_core_tier(best)) << plain;
}

TEST(BlasCoreTools, UsersValueIsKeptAndSaidInOneLine) {
  const std::string best = best_core_here();
  if (best.empty()) GTEST_SKIP() << "needs OpenBLAS and a CPU with AVX2";
  const std::string mine = openblas_core_tier(best) >= 3 ? "Haswell" : "Prescott";  // below the best
  const std::string out = run("OPENBLAS_CORETYPE=" + mine, tool("ds-report"));
  EXPECT_EQ(reported_core(out), mine) << out;
  EXPECT_NE(out.find("(OPENBLAS_CORETYPE=" + mine + " set by the user"), std::string::npos) << out;
  EXPECT_NE(out.find("ds-report: keeping OPENBLAS_CORETYPE=" + mine + " set by the user"), std::string::npos) << out;
}

TEST(BlasCoreTools, DsRunGivesItsRanksTheBestCore) {
  const std::string best = best_core_here();
  if (best.empty()) GTEST_SKIP() << "needs OpenBLAS and a CPU with AVX2";
  const std::string out = run("OPENBLAS_CORETYPE=Prescott DS_OPENBLAS_CORETYPE_CHOSEN=Prescott",
                              tool("ds-run") + " --num_gpus 1 /bin/sh -c \"echo rank core=\\$OPENBLAS_CORETYPE\"");
  EXPECT_NE(out.find("rank core=" + best + "\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace ds
