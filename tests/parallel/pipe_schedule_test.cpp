// The pipe schedules' instruction streams, instruction for instruction against DeepSpeed's
// (data/pipe_schedules.txt: generated from deepspeed/runtime/pipe/schedule.py's logic for
// (stages, micro-batches) = (2,4), (4,8), (3,5), (1,3)), and the pairing that keeps the pipe free of
// deadlock: every send meets its receive at the same step index on the neighbour.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <tuple>

#include "parallel/pipe_schedule.h"

namespace ds::parallel {
namespace {

using Key = std::tuple<std::string, int, int, int>;  // schedule, stages, micro-batches, stage

std::map<Key, std::vector<std::string>> deepspeed_streams() {
  std::ifstream in(std::string(DS_SOURCE_DIR) + "/tests/parallel/data/pipe_schedules.txt");
  std::map<Key, std::vector<std::string>> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream s(line);
    std::string kind;
    int stages = 0, micro = 0, stage = 0, step = 0;
    s >> kind >> stages >> micro >> stage >> step;
    std::string rest;
    std::getline(s, rest);
    out[{kind, stages, micro, stage}].push_back(rest.substr(1));
  }
  return out;
}

TEST(PipeSchedule, StreamsEqualDeepSpeeds) {
  const auto ref = deepspeed_streams();
  ASSERT_EQ(ref.size(), 2u * (2 + 4 + 3 + 1));
  for (const auto& [key, steps] : ref) {
    const auto& [kind, stages, micro, stage] = key;
    const PipeSteps ours = kind == "train" ? train_schedule(micro, stages, stage) : inference_schedule(micro, stages, stage);
    ASSERT_EQ(ours.size(), steps.size()) << kind << " " << stages << "x" << micro << " stage " << stage;
    for (size_t t = 0; t < steps.size(); ++t)
      EXPECT_EQ(to_string(ours[t]), steps[t]) << kind << " " << stages << "x" << micro << " stage " << stage << " step " << t;
  }
}

// Each stage's k-th send to a neighbour is that neighbour's k-th receive from it, in the same step:
// what blocking point-to-point transfers need to make progress.
TEST(PipeSchedule, TransfersPairUpStepByStep) {
  for (auto [stages, micro] : {std::pair{2, 4}, {4, 8}, {3, 5}, {4, 2}, {5, 16}}) {
    std::vector<PipeSteps> all;
    for (int s = 0; s < stages; ++s) all.push_back(train_schedule(micro, stages, s));
    for (int s = 0; s + 1 < stages; ++s) {
      std::vector<size_t> down_send, down_recv, up_send, up_recv;  // step of each activation / gradient
      for (size_t t = 0; t < all[size_t(s)].size(); ++t) {
        for (const auto& in : all[size_t(s)][t]) {
          if (in.op == PipeOp::SendActivation) down_send.push_back(t);
          if (in.op == PipeOp::RecvGrad) up_recv.push_back(t);
        }
        for (const auto& in : all[size_t(s) + 1][t]) {
          if (in.op == PipeOp::RecvActivation) down_recv.push_back(t);
          if (in.op == PipeOp::SendGrad) up_send.push_back(t);
        }
      }
      EXPECT_EQ(down_send, down_recv) << stages << "x" << micro << " stages " << s << "->" << s + 1;
      EXPECT_EQ(up_send, up_recv) << stages << "x" << micro << " stages " << s + 1 << "->" << s;
      EXPECT_EQ(down_send.size(), size_t(micro));
    }
  }
}

TEST(PipeSchedule, BuffersAndCounts) {
  EXPECT_EQ(train_pipe_buffers(8, 4, 0), 5);
  EXPECT_EQ(train_pipe_buffers(8, 4, 3), 2);
  EXPECT_EQ(train_pipe_buffers(2, 4, 0), 2);
  // Every micro-batch runs one forward and one backward on every stage.
  for (int s = 0; s < 3; ++s) {
    int fwd = 0, bwd = 0, steps = 0;
    for (const auto& step : train_schedule(5, 3, s))
      for (const auto& in : step) {
        fwd += in.op == PipeOp::ForwardPass;
        bwd += in.op == PipeOp::BackwardPass;
        steps += in.op == PipeOp::OptimizerStep;
      }
    EXPECT_EQ(fwd, 5);
    EXPECT_EQ(bwd, 5);
    EXPECT_EQ(steps, 1);
  }
  EXPECT_THROW(train_schedule(0, 2, 0), std::exception);
  EXPECT_THROW(train_schedule(4, 2, 2), std::exception);
}

}  // namespace
}  // namespace ds::parallel
