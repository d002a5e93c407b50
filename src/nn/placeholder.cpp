#include "nn/placeholder.h"

#include <fmt/format.h>

#include <string>
#include <unordered_set>

#include "util/error.h"
#include "util/system_info.h"

namespace ds::nn {

LayerSelection LayerSelection::none() {
  return {[](std::size_t) { return false; }};
}

LayerSelection LayerSelection::range(std::size_t begin, std::size_t end) {
  return {[begin, end](std::size_t i) { return i >= begin && i < end; }};
}

torch::Tensor placeholder(torch::IntArrayRef sizes, const torch::TensorOptions& options) {
  return torch::zeros({}, options.requires_grad(false)).expand(sizes);
}

bool is_placeholder(const torch::Tensor& t) {
  if (!t.defined() || t.numel() <= 1) return false;
  for (int64_t s : t.strides())
    if (s != 0) return false;
  return true;
}

void make_placeholders(torch::nn::Module& m) {
  torch::NoGradGuard no_grad;
  for (auto& p : m.parameters(/*recurse=*/true))
    if (!is_placeholder(p)) p.set_data(placeholder(p.sizes(), p.options()));
  for (auto& b : m.buffers(/*recurse=*/true))
    if (!is_placeholder(b)) b.set_data(placeholder(b.sizes(), b.options()));
  release_free_heap_memory();  // else the heap keeps every block's freed tensors (measured: all of them)
}

void keep_selected_layers(torch::nn::Module& model, LayerList& layers, const LayerSelection& selection) {
  if (selection.all()) return;
  std::unordered_set<std::string> kept;
  for (std::size_t i = 0; i < layers.size(); ++i) {
    if (selection.keeps(i)) {
      kept.insert(layers[i].param_names.begin(), layers[i].param_names.end());
      continue;
    }
    layers.replace_forward(i, [name = layers[i].name](const torch::Tensor&) -> torch::Tensor {
      throw Error(fmt::format("layer \"{}\" is not held by this process: the model was built with only some of its "
                              "layers (a pipeline stage's, nn::LayerSelection)",
                              name));
    });
  }
  torch::NoGradGuard no_grad;
  for (auto& item : model.named_parameters(/*recurse=*/true))
    if (!kept.count(item.key()) && !is_placeholder(item.value()))
      item.value().set_data(placeholder(item.value().sizes(), item.value().options()));
  release_free_heap_memory();
}

void init_normal_(torch::Tensor& p, double mean, double std) {
  torch::NoGradGuard no_grad;
  if (is_placeholder(p)) {
    torch::empty(p.sizes(), p.options()).normal_(mean, std);  // the same draws, discarded
    release_free_heap_memory();
  }
  else p.normal_(mean, std);
}

void init_fill_(torch::Tensor& p, double value) {
  torch::NoGradGuard no_grad;
  if (!is_placeholder(p)) p.fill_(value);
}

void to_dtype(torch::nn::Module& m, torch::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  auto convert = [dtype](torch::Tensor& t) {
    if (!t.is_floating_point() || t.scalar_type() == dtype) return;
    t.set_data(is_placeholder(t) ? placeholder(t.sizes(), t.options().dtype(dtype)) : t.to(dtype));
  };
  for (auto& p : m.parameters(/*recurse=*/true)) convert(p);
  for (auto& b : m.buffers(/*recurse=*/true)) convert(b);
}

}  // namespace ds::nn
