// The tensor side of a checkpoint (LibTorch; target ds_checkpoint_states). A rank file holds this
// rank's pieces of every trainable parameter — fp32 master and each optimizer state, de-padded,
// keyed by (parameter name, offset into the flattened parameter) — plus its RNG state; the model
// file holds what the optimizer does not own (frozen parameters, buffers). Loading reads, for each
// local piece, exactly the overlapping ranges of whichever rank files hold them, so a checkpoint
// saved at world N loads at any world M, stage or offload mode, without materialising the model.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <span>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/manifest.h"
#include "format/safetensors.h"
#include "zero/flat_params.h"

namespace ds::checkpoint {

// This rank's optimizer spans, as the engine holds them (one entry per flat group).
struct LocalStates {
  std::vector<const zero::FlatGroup*> layouts;  // slots: name, span offset, numel, param_offset
  std::vector<torch::Tensor> masters;           // fp32 [padded_numel]
  std::vector<const std::map<std::string, torch::Tensor>*> states;  // optimizer state spans (may be null)
  std::vector<std::string> state_names;         // the optimizer's, without "fp32"
};

format::StDtype st_dtype_of(torch::ScalarType t);        // throws NotSupported for dtypes safetensors lacks
torch::ScalarType scalar_type_of(format::StDtype d);

// The writers below return the file's checksums (for the manifest), computed as it was written.

// Writes this rank's pieces (when `with_pieces`), `rng_state` (a uint8 tensor) and `private_tensors`
// (state that differs per rank and is not a piece of a parameter: the 1-bit optimizers' error
// buffers) to `path`.
format::FileChecksums write_rank_file(const std::string& path, const LocalStates& local, bool with_pieces,
                              const torch::Tensor& rng_state, int rank, int world,
                              const std::vector<std::pair<std::string, torch::Tensor>>& private_tensors = {});
// The same file for state that lives in swap files (ZeRO-Infinity): pieces are cut at sub-group
// boundaries too and each sub-group is read (`read`, into 1 + state_names.size() buffers of
// span.numel floats) just before its pieces are written, so RAM holds one sub-group at a time.
struct SwappedSpan {
  size_t group;
  int64_t offset, numel;
};
using SubGroupReader = std::function<void(size_t k, std::span<float* const> states)>;
format::FileChecksums write_swapped_rank_file(const std::string& path, const std::vector<const zero::FlatGroup*>& layouts,
                                      const std::vector<std::string>& state_names, const std::vector<SwappedSpan>& spans,
                                      const SubGroupReader& read, const torch::Tensor& rng_state, int rank, int world);

// Writes whole tensors by name (the model file; also save_16bit_model).
format::FileChecksums write_tensor_file(const std::string& path,
                                const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                                const std::map<std::string, std::string>& metadata = {});

// Rank 0, after every rank file is on disk: each parameter's pieces, from the files' headers.
struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string dtype;
};
std::vector<ParamEntry> collect_pieces(const std::string& dir, const std::vector<std::string>& rank_files,
                                       const std::vector<ParamInfo>& params);

// Reads slices of a saved tag; rank files are opened (header only) the first time a slice needs one.
// With `verify` and a manifest that has checksums, every byte read is checked against them (a
// mismatch throws ds::IoError naming the file, the tensor and both CRCs); a manifest without
// checksums (an older checkpoint) is read unverified, with one warning.
class SliceReader {
 public:
  SliceReader(std::string dir, const Manifest& manifest, bool verify = true);

  bool verifying() const { return verify_; }
  // The checksums a file of this tag is verified against (nullptr when not verifying).
  const format::FileChecksums* checksums_of(const std::string& file) const;

  // Elements [offset, offset + n) of `state` ("fp32", "exp_avg", ...) of `param` into dst (fp32).
  void read(const std::string& state, const ParamEntry& param, int64_t offset, int64_t n, float* dst);
  // Rank r's saved RNG state (undefined tensor when that file has none).
  torch::Tensor rng_state(int rank);
  // Rank r's private tensor `name` (write_rank_file's private_tensors), undefined when absent.
  torch::Tensor rank_private(int rank, const std::string& name);
  // A whole frozen parameter or buffer, from the model file holding it (Manifest::module_file_of),
  // into dst (same shape; converted to dst's dtype).
  void read_module_tensor(const std::string& name, torch::Tensor& dst);

 private:
  const format::SafetensorsFile& file(int rank);

  std::string dir_;
  const Manifest& manifest_;
  bool verify_;
  std::vector<std::unique_ptr<format::SafetensorsFile>> files_;
  std::map<std::string, std::unique_ptr<format::SafetensorsFile>> model_files_;  // opened on first read
};

}  // namespace ds::checkpoint
