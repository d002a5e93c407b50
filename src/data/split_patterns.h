// The pre-tokenizer regexes of byte-level BPE tokenizers, written by hand (no regex engine): GPT-2's
// (also OPT's, and the one ByteLevel's use_regex implies) and Llama-3's (Qwen2's differs only in
// splitting digits one by one instead of up to three). Each is recognised by its exact text in
// tokenizer.json; any other pattern is refused by name at load.
#pragma once

#include <optional>
#include <string_view>
#include <utility>
#include <vector>

namespace ds::data {

enum class SplitPattern { kGpt2, kLlama3, kQwen2 };

// The regex text each pattern is recognised by (as tokenizer.json spells it).
std::string_view split_pattern_regex(SplitPattern p);
std::string_view split_pattern_name(SplitPattern p);
std::optional<SplitPattern> recognise_split_regex(std::string_view regex);

// Splits `text` into the regex's matches ("Isolated": every match is one piece; these patterns
// leave no gaps). Pieces are [begin, end) byte offsets, appended to `out`.
void split_with_pattern(SplitPattern p, std::string_view text, std::vector<std::pair<size_t, size_t>>& out);

}  // namespace ds::data
