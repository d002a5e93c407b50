// Issue 22, item 13: MPI is initialized once per process and finalized at exit, so a program may build a
// second engine after destroying the first (at 2 ranks this failed with "MPI was already finalized").
// Issue 17: a hung pipeline stage ends the job through the watchdog.
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

// Issue 17: the last stage of a 2-stage pipeline hangs in its second batch; the first stage, blocked
// on its neighbour, reports through the comm watchdog which pipe instruction it was waiting in (its
// log lists the gradient's receive), and the job ends non-zero within the timeout instead of hanging.
TEST(FaultMpi, PipelineStageThatHangsEndsTheJob) {
  const std::string probe = std::string(DS_FAULTS_BINARY_DIR) + "/faults_pipeline_stall_probe";
  auto r = run(mpirun(2) + " -x DS_COMM_TIMEOUT_S=5 " + probe, 120);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("pipeline_stall: step 0 done on stage 0"), std::string::npos) << r.output;
  // The collective the watchdog names is a transfer of the pipe (the send queued before the
  // gradient's receive on the same pair, or the receive itself), tagged with its instruction.
  const size_t report = r.output.find("comm watchdog: collective");
  ASSERT_NE(report, std::string::npos) << r.output;
  const std::string line = r.output.substr(report, r.output.find('\n', report) - report);
  EXPECT_NE(line.find("tag=pipe stage 0 "), std::string::npos) << line;
  EXPECT_NE(r.output.find("pipe stage 0 RecvGrad(buffer_id="), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("step 1 done"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace ds::faults
