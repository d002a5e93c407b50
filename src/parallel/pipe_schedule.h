// DeepSpeed's pipeline schedules (deepspeed/runtime/pipe/schedule.py) as instruction streams: a
// schedule is a list of steps, each a list of instructions one stage executes in order. Every step is
// atomic (a barrier between steps cannot deadlock), and the sends and receives of neighbouring stages
// pair up in the same order on both sides, which is what lets blocking point-to-point transfers run
// the pipe. The streams are the same as DeepSpeed's, instruction for instruction
// (tests/parallel/pipe_schedule_test.cpp holds DeepSpeed's for (2,4), (4,8), (3,5)).
//
// TrainSchedule is 1F1B: stage s runs (stages - s) warm-up forwards, then alternates one forward and
// one backward, then drains the backwards; at most num_pipe_buffers() micro-batches are alive on a
// stage at once, so activation memory does not grow with the number of micro-batches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ds::parallel {

enum class PipeOp : uint8_t {
  LoadMicroBatch,   // inputs (first stage) / labels (last stage) of the next micro-batch into buffer
  ForwardPass,      // outputs[buffer] = stage(inputs[buffer]) (+ the loss on the last stage)
  BackwardPass,     // autograd from outputs[buffer] with the gradient received (or from the loss)
  SendActivation,   // outputs[buffer] to the next stage
  RecvActivation,   // inputs[buffer] from the previous stage
  SendGrad,         // the gradient of inputs[buffer] to the previous stage
  RecvGrad,         // the gradient of outputs[buffer] from the next stage
  ReduceTiedGrads,  // sum tied parameters' gradients over the stages that share them
  ReduceGrads,      // reduce gradients over the data-parallel group
  OptimizerStep,    // one optimizer step (and the batch's loss agreed over the pipe)
};

struct PipeInstruction {
  PipeOp op = PipeOp::ForwardPass;
  int buffer = -1;  // the pipe buffer a buffer op works on; -1 for the step-wide ops
  bool operator==(const PipeInstruction&) const = default;
};

// "ForwardPass(buffer_id=1)", "OptimizerStep()": DeepSpeed's repr of the instruction.
std::string to_string(const PipeInstruction& in);
// One step as "[RecvActivation(buffer_id=0), ForwardPass(buffer_id=0)]".
std::string to_string(const std::vector<PipeInstruction>& step);

using PipeSteps = std::vector<std::vector<PipeInstruction>>;

// TrainSchedule(micro_batches, stages, stage_id).steps(): 2 x (micro_batches + stages - 1) steps.
// Throws ds::Error for micro_batches < 1, stages < 1 or stage_id outside [0, stages).
PipeSteps train_schedule(int micro_batches, int stages, int stage_id);
// TrainSchedule.num_pipe_buffers(): max(2, min(stages - stage_id + 1, micro_batches)).
int train_pipe_buffers(int micro_batches, int stages, int stage_id);

// InferenceSchedule(micro_batches, stages, stage_id).steps(): micro_batches + stages - 1 steps of
// forwards only, two buffers alternating between receive and send.
PipeSteps inference_schedule(int micro_batches, int stages, int stage_id);
inline constexpr int kInferencePipeBuffers = 2;

}  // namespace ds::parallel
