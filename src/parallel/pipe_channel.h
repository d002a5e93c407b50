// PipeChannels: the point-to-point transfers between neighbouring pipeline stages, as broadcasts
// over two-rank communicators (one per pair of neighbours at the same data/sequence/model
// coordinates), DeepSpeed's p2p over its pipe groups. Each pair's transfers run in issue order on
// both sides, and the schedules (pipe_schedule.h) issue them in the same order at both ends, so
// blocking receives and asynchronous sends always meet.
//
// Sends are asynchronous (the stage computes while its output travels); the tensor is kept alive
// until drain(). An activation's shape and dtype cross once per direction and are then cached, as
// DeepSpeed's first-batch meta exchange: a later activation of another shape is a ds::Error naming
// both (pipelines run fixed-shape micro-batches) unless reset_shapes() came between (a curriculum's
// new sequence length). An activation may carry side tensors (a packed
// row's document and position ids: what every stage needs beside the hidden states, as DeepSpeed's
// pipelines pass tuples); they cross with it, in order, and never carry a gradient back.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "comm/communicator.h"
#include "parallel/topology.h"

namespace ds::parallel {

// What crosses from one stage to the next: the activation and its side tensors (at most
// PipeChannels::kMaxSideTensors).
struct PipeActivation {
  torch::Tensor x;
  std::vector<torch::Tensor> side;
};

class PipeChannels {
 public:
  static constexpr int kMaxSideTensors = 3;
  // Collective over topology.world() (two splits: even pairs (0,1),(2,3).. and odd pairs (1,2),..).
  explicit PipeChannels(const Topology& topology);
  ~PipeChannels();

  int stage() const noexcept { return stage_; }
  int stages() const noexcept { return stages_; }

  // To the next stage (activations) and from it (their gradients). `what` names the transfer in
  // the collective log and in the watchdog's report ("SendActivation(buffer_id=1)").
  void send_activation(const torch::Tensor& out, const std::vector<torch::Tensor>& side, const std::string& what);
  torch::Tensor recv_grad(const torch::Tensor& like, const std::string& what);
  // From the previous stage (activations) and to it (the gradients of what was received).
  PipeActivation recv_activation(const std::string& what);
  void send_grad(const torch::Tensor& grad, const std::string& what);

  // Waits for every send in flight (rethrowing a failed one).
  void drain();
  // Forgets the cached shapes (DeepSpeed's reset_activation_shape): the next activation each way
  // crosses with its shape again. Both ends of a channel must call it at the same point.
  void reset_shapes();

 private:
  struct Pending {
    comm::Work work;
    torch::Tensor keep;  // the bytes being sent
  };
  void send(comm::Communicator& c, const torch::Tensor& t, const std::string& what);

  int stage_ = 0, stages_ = 1;
  std::unique_ptr<comm::Communicator> next_, prev_;  // null at the pipe's ends
  std::optional<std::vector<int64_t>> sent_meta_, recv_meta_;
  std::vector<Pending> pending_;
};

}  // namespace ds::parallel
