// Hugging Face weight files: reading one model.safetensors or the shards a
// model.safetensors.index.json names (with dtype conversion), and writing them (single file or
// shards + index, {"format": "pt"} metadata as transformers requires).
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "format/safetensors.h"

namespace ds::models {

class HfWeights {
 public:
  // `path`: a .safetensors file, a *.index.json, or a directory holding model.safetensors.index.json
  // or model.safetensors (the index wins). ds::IoError naming the path when there is neither, the
  // index is malformed, a shard is missing or unreadable, or a tensor the index names is not in
  // its shard.
  explicit HfWeights(const std::string& path);

  bool contains(const std::string& name) const { return where_.count(name) != 0; }
  std::vector<std::string> names() const;  // sorted
  const format::TensorInfo& info(const std::string& name) const;
  const std::string& file_of(const std::string& name) const;
  // The tensor as stored, converted to `dtype` (float files: F64/F32/F16/BF16; integer files too).
  torch::Tensor read(const std::string& name, torch::ScalarType dtype) const;
  // What was opened: the file or the index.
  const std::string& source() const { return source_; }

 private:
  std::string source_;
  std::vector<std::unique_ptr<format::SafetensorsFile>> files_;
  std::map<std::string, std::pair<const format::SafetensorsFile*, const format::TensorInfo*>> where_;
};

torch::ScalarType torch_dtype_of(format::StDtype d, const std::string& what);  // IoError if no torch dtype
format::StDtype st_dtype_of(torch::ScalarType t);                              // NotSupported if none

// Writes `tensors` (CPU or not, any layout; written contiguous, in this order) into `dir` as
// model.safetensors, or — when max_shard_bytes > 0 and they exceed it — as
// model-0000i-of-0000n.safetensors (tensors in order, a new shard when the next would pass the
// limit) plus model.safetensors.index.json. Each file is committed atomically; weight files of a
// previous save in the other layout are removed after the new ones are in place.
void write_hf_weights(const std::string& dir, const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                      int64_t max_shard_bytes = 0);

// Writes `text` to `path` through a temp file and a rename: the old file survives any failure.
void write_text_atomically(const std::string& path, const std::string& text);

}  // namespace ds::models
