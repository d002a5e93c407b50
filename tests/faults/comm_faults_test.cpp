// Issue 22, item 13: MPI is initialized once per process and finalized at exit, so a program may build a
// second engine after destroying the first (at 2 ranks this failed with "MPI was already finalized").
#include "faults_test_util.h"

namespace ds::faults {
namespace {

TEST(FaultMpi, SecondEngineInOneProcessAtTwoRanks) {
  const std::string probe = std::string(DS_FAULTS_BINARY_DIR) + "/faults_engine_twice_probe";
  auto r = run(mpirun(2) + " " + probe, 240);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find("already finalized"), std::string::npos) << r.output;
  // Both ranks finish both engines, and mpirun sees every rank finalize (no "exited without finalize").
  size_t oks = 0;
  for (size_t at = r.output.find("engine_twice: ok"); at != std::string::npos; at = r.output.find("engine_twice: ok", at + 1))
    ++oks;
  EXPECT_EQ(oks, 2u) << r.output;
  EXPECT_EQ(r.output.find("finalize"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds::faults
