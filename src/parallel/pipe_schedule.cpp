#include "parallel/pipe_schedule.h"

#include <fmt/format.h>

#include "util/error.h"

namespace ds::parallel {
namespace {

void check_shape(int micro_batches, int stages, int stage_id) {
  DS_CHECK(micro_batches >= 1 && stages >= 1 && stage_id >= 0 && stage_id < stages, Error,
           fmt::format("pipeline schedule: {} micro-batches over {} stages at stage {}", micro_batches, stages, stage_id));
}

bool even(int x) { return x % 2 == 0; }

// The micro-batch stage s works on at step t of the train schedule, and whether it is a forward:
// forwards on steps of the stage's parity, backwards on the others, each stage lagging the one
// before it by one step (Python's floor division; ids may be out of range: nothing to do then).
struct Slot {
  int micro = 0;
  bool forward = false;
};
int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
Slot train_slot(int t, int stages, int s) {
  if (even(t) && even(s)) return {floor_div(t, 2) - floor_div(s, 2), true};
  if (!even(t) && !even(s)) return {floor_div(t - 1, 2) - floor_div(s, 2), true};
  if (even(t) && !even(s)) return {floor_div(t, 2) - stages + floor_div(s + 1, 2), false};
  return {floor_div(t - 1, 2) - stages + 1 + floor_div(s, 2), false};
}

}  // namespace

std::string to_string(const PipeInstruction& in) {
  static constexpr const char* kNames[] = {"LoadMicroBatch", "ForwardPass", "BackwardPass",    "SendActivation", "RecvActivation",
                                           "SendGrad",       "RecvGrad",    "ReduceTiedGrads", "ReduceGrads",    "OptimizerStep"};
  const char* name = kNames[size_t(in.op)];
  return in.buffer < 0 ? fmt::format("{}()", name) : fmt::format("{}(buffer_id={})", name, in.buffer);
}

std::string to_string(const std::vector<PipeInstruction>& step) {
  std::string out = "[";
  for (size_t i = 0; i < step.size(); ++i) out += (i ? ", " : "") + to_string(step[i]);
  return out + "]";
}

int train_pipe_buffers(int micro_batches, int stages, int stage_id) {
  check_shape(micro_batches, stages, stage_id);
  return std::max(2, std::min(stages - stage_id + 1, micro_batches));
}

PipeSteps train_schedule(int micro_batches, int stages, int stage_id) {
  const int buffers = train_pipe_buffers(micro_batches, stages, stage_id);
  auto valid_micro = [&](int m) { return m >= 0 && m < micro_batches; };
  auto valid_stage = [&](int s) { return s >= 0 && s < stages; };
  const int prev = stage_id - 1, next = stage_id + 1;
  const int total = 2 * (micro_batches + stages - 1);
  PipeSteps steps;
  int prev_micro = -1, prev_buffer = -1, curr_buffer = -1;
  for (int t = 0; t < total; ++t) {
    const Slot slot = train_slot(t, stages, stage_id);
    if (valid_micro(prev_micro)) prev_buffer = prev_micro % buffers;
    if (valid_micro(slot.micro)) curr_buffer = slot.micro % buffers;
    std::vector<PipeInstruction> cmds;
    // Exchange with the neighbours first: a forward step receives its input and returns the
    // previous micro-batch's input gradient; a backward step passes the previous output on and
    // receives this micro-batch's output gradient.
    if (slot.forward) {
      if (valid_micro(slot.micro) && valid_stage(prev)) cmds.push_back({PipeOp::RecvActivation, curr_buffer});
      if (valid_micro(prev_micro) && valid_stage(prev)) cmds.push_back({PipeOp::SendGrad, prev_buffer});
    } else {
      if (valid_micro(prev_micro) && valid_stage(next)) cmds.push_back({PipeOp::SendActivation, prev_buffer});
      if (valid_micro(slot.micro) && valid_stage(next)) cmds.push_back({PipeOp::RecvGrad, curr_buffer});
    }
    if ((stage_id == 0 || stage_id == stages - 1) && slot.forward && valid_micro(slot.micro))
      cmds.push_back({PipeOp::LoadMicroBatch, curr_buffer});
    if (valid_micro(slot.micro)) cmds.push_back({slot.forward ? PipeOp::ForwardPass : PipeOp::BackwardPass, curr_buffer});
    if (t == total - 1) {
      cmds.push_back({PipeOp::ReduceTiedGrads, -1});
      cmds.push_back({PipeOp::ReduceGrads, -1});
      cmds.push_back({PipeOp::OptimizerStep, -1});
    }
    prev_micro = slot.micro;
    steps.push_back(std::move(cmds));
  }
  return steps;
}

PipeSteps inference_schedule(int micro_batches, int stages, int stage_id) {
  check_shape(micro_batches, stages, stage_id);
  auto valid_micro = [&](int m) { return m >= 0 && m < micro_batches; };
  const bool has_prev = stage_id > 0, has_next = stage_id < stages - 1;
  PipeSteps steps;
  for (int t = 0; t < micro_batches + stages - 1; ++t) {
    const int micro = t - stage_id;
    // Even stages receive into buffer t % 2 and send from the other; odd stages the reverse, so
    // each transfer's two ends name the same buffer parity.
    const int recv_buf = even(stage_id) ? t % 2 : (t + 1) % 2;
    const int send_buf = even(stage_id) ? (t + 1) % 2 : t % 2;
    std::vector<PipeInstruction> cmds;
    if ((stage_id == 0 || stage_id == stages - 1) && valid_micro(micro)) cmds.push_back({PipeOp::LoadMicroBatch, recv_buf});
    const bool send = has_next && valid_micro(micro - 1), recv = has_prev && valid_micro(micro);
    if (even(stage_id)) {  // even stages send first, odd ones receive first: the pairs meet
      if (send) cmds.push_back({PipeOp::SendActivation, send_buf});
      if (recv) cmds.push_back({PipeOp::RecvActivation, recv_buf});
    } else {
      if (recv) cmds.push_back({PipeOp::RecvActivation, recv_buf});
      if (send) cmds.push_back({PipeOp::SendActivation, send_buf});
    }
    if (valid_micro(micro)) cmds.push_back({PipeOp::ForwardPass, recv_buf});
    steps.push_back(std::move(cmds));
  }
  return steps;
}

}  // namespace ds::parallel
