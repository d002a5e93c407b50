#include "data/sft_dataset.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>

#include "util/error.h"

namespace ds::data {

int64_t SftDataset::tokens() const {
  int64_t n = 0;
  for (const auto& e : examples) n += static_cast<int64_t>(e.ids.size());
  return n;
}

int64_t SftDataset::trained_tokens() const {
  int64_t n = 0;
  for (const auto& e : examples)
    for (int32_t l : e.labels) n += l != kIgnoreLabel;
  return n;
}

std::string SftDataset::describe() const {
  std::string s = path + ": " + std::to_string(examples.size()) + " examples (text " + std::to_string(counts[0]) +
                  ", prompt/completion " + std::to_string(counts[1]) + ", messages " + std::to_string(counts[2]) +
                  "), " + std::to_string(tokens()) + " tokens, " + std::to_string(trained_tokens()) + " with loss";
  if (truncated) s += "; " + std::to_string(truncated) + " truncated to the sequence length";
  if (skipped) s += "; " + std::to_string(skipped) + " bad lines skipped (first: " + first_skip_reason + ")";
  return s;
}

SftDataset read_sft_jsonl(const std::string& path, const Tokenizer& tok, const SftReadOptions& options) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("--data " + path + ": cannot open (" + std::strerror(errno) + ")");
  std::unique_ptr<ChatTemplate> chat;
  if (!tok.chat_template().empty()) chat = std::make_unique<ChatTemplate>(ChatTemplate::recognise(tok.chat_template()));
  SftDataset out;
  out.path = path;
  int64_t lineno = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineno;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    const std::string where = path + ":" + std::to_string(lineno);
    try {
      SftRecord rec = parse_sft_record(line, where);
      SftExample ex = tokenize_sft_record(rec, tok, chat.get(), where);
      if (options.max_tokens && ex.ids.size() > options.max_tokens) {
        ex.ids.resize(options.max_tokens);
        ex.labels.resize(options.max_tokens);
        ++out.truncated;
      }
      ++out.counts[static_cast<int>(rec.kind)];
      out.examples.push_back(std::move(ex));
    } catch (const Error& e) {
      if (!options.skip_bad_lines) throw;
      if (out.skipped++ == 0) out.first_skip_reason = e.what();
    }
  }
  if (in.bad()) throw IoError("--data " + path + ": read failed at line " + std::to_string(lineno + 1));
  if (out.examples.empty())
    throw ConfigError(path, "no usable example (" + std::to_string(lineno) + " lines, " + std::to_string(out.skipped) +
                                " bad); each line is {\"text\"}, {\"prompt\",\"completion\"} or {\"messages\"}");
  return out;
}

}  // namespace ds::data
