// Training data for the GPT-2 family: a token sequence (TokenDataset) and a deterministic sampler
// of fixed-length windows (BatchSampler) whose sample i depends only on (seed, i).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ds::models {

// llm.c token file: 256 little-endian int32 header (magic, version, token count, rest 0), then
// uint16 little-endian tokens.
inline constexpr int32_t kLlmcMagic = 20240520;
inline constexpr int32_t kLlmcVersion = 1;
inline constexpr int64_t kLlmcHeaderInts = 256;

class TokenDataset {
 public:
  enum class Format { kBytes, kLlmc, kTokens };  // kTokens: from_tokens()

  // Reads `path`, choosing the format by content: a file starting with the llm.c magic is a token
  // file; any other file is text, one token per byte (vocab 256). A file that has NUL bytes in its
  // first 1 KiB but no magic is refused as a damaged/foreign binary file rather than read as text.
  // Errors (ds::IoError): unreadable file (path + strerror), not a regular file (/dev/zero, a pipe),
  // bad llm.c header, truncated file; ds::OutOfMemory when reading it would not fit in RAM.
  static TokenDataset from_file(const std::string& path);
  // Byte-level tokens of `text` (vocab 256).
  static TokenDataset from_text(const std::string& text);
  // Tokens as given (vocab = max + 1, at least 1).
  static TokenDataset from_tokens(std::vector<uint16_t> tokens);

  int64_t size() const noexcept { return static_cast<int64_t>(tokens_->size()); }
  int64_t vocab_size() const noexcept { return vocab_size_; }
  Format format() const noexcept { return format_; }
  const std::vector<uint16_t>& tokens() const noexcept { return *tokens_; }
  torch::Tensor to_tensor() const;  // int64 [size()]
  // "path (llm.c tokens, N tokens, vocab V)" — for logs.
  std::string describe() const;

 private:
  friend class BatchSampler;
  TokenDataset(std::shared_ptr<const std::vector<uint16_t>> tokens, int64_t vocab_size,
               Format format, std::string source);

  std::shared_ptr<const std::vector<uint16_t>> tokens_;  // shared with samplers: copies are cheap
  int64_t vocab_size_;
  Format format_;
  std::string source_;
};

// Writes `tokens` as an llm.c token file (used by tests and data tools). ds::IoError on failure.
void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens);

struct Batch {
  torch::Tensor inputs;   // int64 [count, seq_len]
  torch::Tensor targets;  // int64 [count, seq_len]: inputs shifted left by one token
};

class BatchSampler {
 public:
  // Throws ds::Error if seq_len < 1 or the dataset has fewer than seq_len + 1 tokens.
  BatchSampler(const TokenDataset& data, int64_t seq_len, uint64_t seed);

  // Samples first_sample .. first_sample+count-1. Sample i is the window of seq_len + 1 tokens at
  // offset(i), so batch(0, 8) equals cat(batch(0, 4), batch(4, 4)) and ranks or micro-batches can
  // split a range of samples with identical results.
  Batch batch(int64_t first_sample, int64_t count) const;

  // splitmix64(seed, i) mod (size - seq_len): the window's first token.
  int64_t offset(int64_t sample) const;

  int64_t seq_len() const noexcept { return seq_len_; }
  uint64_t seed() const noexcept { return seed_; }

 private:
  std::shared_ptr<const std::vector<uint16_t>> tokens_;
  int64_t seq_len_;
  uint64_t seed_;
};

}  // namespace ds::models
