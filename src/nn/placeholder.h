// Building a model with only some of its layers: a pipeline stage materialises its own layers and
// holds placeholders for the rest, so no process ever holds the whole model (DeepSpeed's LayerSpec
// aim, for models built as one module). A placeholder keeps a parameter's name, shape, dtype and
// requires_grad (what partitioning by parameter count reads) over one element of storage.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <functional>

#include "nn/layer_list.h"

namespace ds::nn {

// Which layers of a model's LayerList (by index) a process materialises. Default: all of them.
struct LayerSelection {
  std::function<bool(std::size_t)> keep;  // null: every layer

  bool all() const noexcept { return !keep; }
  bool keeps(std::size_t layer) const { return !keep || keep(layer); }
  static LayerSelection none();
  static LayerSelection range(std::size_t begin, std::size_t end);  // [begin, end)
};

// A tensor of `sizes` and `options` over one element of storage (every stride 0): numel(), sizes()
// and dtype are a real tensor's, reading gives zeros, writing into it throws.
torch::Tensor placeholder(torch::IntArrayRef sizes, const torch::TensorOptions& options);
// Whether `t` is such a placeholder (more than one element, every stride 0).
bool is_placeholder(const torch::Tensor& t);
// Every parameter and buffer of `m`, recursively, becomes a placeholder of its shape.
void make_placeholders(torch::nn::Module& m);
// After a model is built: the parameters no selected layer of `layers` names become placeholders,
// and the layers not selected throw a ds::Error naming the layer when run.
void keep_selected_layers(torch::nn::Module& model, LayerList& layers, const LayerSelection& selection);

// Initialisers that leave placeholders alone. init_normal_ draws the same numbers from torch's global
// generator for a placeholder (into a scratch tensor of its shape) as for the parameter itself, so
// the parameters after it receive what they would in the whole model.
void init_normal_(torch::Tensor& p, double mean, double std);
void init_fill_(torch::Tensor& p, double value);
// Converts every parameter and buffer of `m` to `dtype`; placeholders stay placeholders.
void to_dtype(torch::nn::Module& m, torch::ScalarType dtype);

}  // namespace ds::nn
