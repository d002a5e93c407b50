// A fine-tuning JSON-lines file read and tokenized in one pass (sft_record.h for the shapes,
// sft_example.h for the labels). Blank lines are skipped; a bad line stops the read with its
// file:line and field, or with `skip_bad_lines` is counted, reported once, and left out.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/sft_example.h"
#include "data/tokenizer.h"

namespace ds::data {

struct SftReadOptions {
  size_t max_tokens = 0;        // > 0: longer examples are cut to this many tokens (counted in `truncated`)
  bool skip_bad_lines = false;  // false: the first bad line is the error
};

struct SftDataset {
  std::vector<SftExample> examples;
  std::string path;
  int64_t skipped = 0;            // bad lines left out (skip_bad_lines)
  std::string first_skip_reason;  // the first of them, for the report
  int64_t truncated = 0;          // examples cut to max_tokens
  int64_t counts[3] = {0, 0, 0};  // per SftRecord::Kind
  int64_t tokens() const;
  int64_t trained_tokens() const;  // labels that are not -100
  // "path: N examples (text a, prompt/completion b, messages c), T tokens, L trained; ..." — for logs.
  std::string describe() const;
};

// ds::IoError when the file cannot be read; ds::ConfigError "path:line: ..." for a bad line (unless
// skipped) and for a file with no usable example.
SftDataset read_sft_jsonl(const std::string& path, const Tokenizer& tok, const SftReadOptions& options = {});

}  // namespace ds::data
