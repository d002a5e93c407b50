// TokenDataset (text bytes or llm.c token files, chosen by content) and BatchSampler.
#include "models/token_data.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "util/error.h"
#include "util/splitmix64.h"
#include "util/system_info.h"

namespace ds::models {
namespace {

using FilePtr = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// What a file that is not a plain file is ("a character device" for /dev/zero), for messages.
const char* kind_of(const struct stat& st) {
  if (S_ISDIR(st.st_mode)) return "a directory";
  if (S_ISCHR(st.st_mode)) return "a character device";
  if (S_ISBLK(st.st_mode)) return "a block device";
  if (S_ISFIFO(st.st_mode)) return "a pipe";
  if (S_ISSOCK(st.st_mode)) return "a socket";
  return "not a regular file";
}

// Refuses, before reading a byte, what would never end (/dev/zero, a pipe) or could not fit: the
// file's bytes and its uint16 tokens are in memory together while it is parsed (3 bytes per byte).
void check_readable_size(const std::string& path) {
  struct stat st {};
  DS_CHECK(::stat(path.c_str(), &st) == 0, IoError,
           "cannot open token data \"" + path + "\": " + std::strerror(errno));
  DS_CHECK(S_ISREG(st.st_mode), IoError,
           "token data \"" + path + "\" is " + kind_of(st) +
               "; give a regular file (text, or an llm.c .bin token file)");
  const uint64_t need = 3 * static_cast<uint64_t>(st.st_size);
  const uint64_t avail = mem_available_bytes();
  DS_CHECK(avail == 0 || need <= avail, OutOfMemory,
           "token data \"" + path + "\" is " + format_bytes(static_cast<uint64_t>(st.st_size)) +
               "; reading it takes about " + format_bytes(need) + " of RAM (its bytes and its tokens), but only " +
               format_bytes(avail) + " is available; use a smaller file (or a part of it)");
}

std::string read_all(const std::string& path) {
  check_readable_size(path);
  FilePtr f(std::fopen(path.c_str(), "rb"), &std::fclose);
  DS_CHECK(f != nullptr, IoError,
           "cannot open token data \"" + path + "\": " + std::strerror(errno));
  std::string bytes;
  char buf[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), f.get())) > 0) bytes.append(buf, n);
  DS_CHECK(!std::ferror(f.get()), IoError,
           "cannot read token data \"" + path + "\": " + std::strerror(errno));
  return bytes;
}

int32_t read_le_i32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (int k = 3; k >= 0; --k) v = (v << 8) | static_cast<unsigned char>(b[at + k]);
  return static_cast<int32_t>(v);
}

int64_t vocab_of(const std::vector<uint16_t>& tokens) {
  if (tokens.empty()) return 1;
  return static_cast<int64_t>(*std::max_element(tokens.begin(), tokens.end())) + 1;
}

// Parses an llm.c token file whose magic has already matched.
std::vector<uint16_t> parse_llmc(const std::string& b, const std::string& path) {
  const size_t header_bytes = kLlmcHeaderInts * 4;
  DS_CHECK(b.size() >= header_bytes, IoError,
           "llm.c token file \"" + path + "\" is truncated: " + std::to_string(b.size()) +
               " bytes, shorter than its " + std::to_string(header_bytes) + "-byte header");
  const int32_t version = read_le_i32(b, 4);
  DS_CHECK(version == kLlmcVersion, IoError,
           "llm.c token file \"" + path + "\" has version " + std::to_string(version) +
               ", expected " + std::to_string(kLlmcVersion) + " (uint16 tokens)");
  const int32_t count = read_le_i32(b, 8);
  DS_CHECK(count >= 0, IoError,
           "llm.c token file \"" + path + "\" has a negative token count " + std::to_string(count));
  const size_t expected = header_bytes + 2 * static_cast<size_t>(count);
  DS_CHECK(b.size() >= expected, IoError,
           "llm.c token file \"" + path + "\" is truncated: header says " + std::to_string(count) +
               " tokens (" + std::to_string(expected) + " bytes) but the file has " +
               std::to_string(b.size()) + " bytes");
  DS_CHECK(b.size() == expected, IoError,
           "llm.c token file \"" + path + "\" has " + std::to_string(b.size() - expected) +
               " bytes after its " + std::to_string(count) + " tokens (corrupt header count?)");
  std::vector<uint16_t> tokens(static_cast<size_t>(count));
  for (size_t i = 0; i < tokens.size(); ++i) {
    const auto lo = static_cast<unsigned char>(b[header_bytes + 2 * i]);
    const auto hi = static_cast<unsigned char>(b[header_bytes + 2 * i + 1]);
    tokens[i] = static_cast<uint16_t>(lo | (hi << 8));
  }
  return tokens;
}

}  // namespace

TokenDataset::TokenDataset(std::shared_ptr<const std::vector<uint16_t>> tokens,
                           int64_t vocab_size, Format format, std::string source)
    : tokens_(std::move(tokens)), vocab_size_(vocab_size), format_(format),
      source_(std::move(source)) {}

TokenDataset TokenDataset::from_file(const std::string& path) {
  const std::string bytes = read_all(path);
  if (bytes.size() >= 4 && read_le_i32(bytes, 0) == kLlmcMagic) {
    auto tokens = std::make_shared<const std::vector<uint16_t>>(parse_llmc(bytes, path));
    const int64_t vocab = vocab_of(*tokens);
    return TokenDataset(std::move(tokens), vocab, Format::kLlmc, path);
  }
  // Text never holds NUL bytes; a binary file without the magic is a damaged or foreign token
  // file, and training on its raw bytes would silently learn garbage.
  const size_t probe = std::min<size_t>(bytes.size(), kLlmcHeaderInts * 4);
  DS_CHECK(bytes.find('\0') >= probe, IoError,
           "\"" + path + "\" is binary but not an llm.c token file: bad magic " +
               (bytes.size() >= 4 ? std::to_string(read_le_i32(bytes, 0)) : std::string("(none)")) +
               ", expected " + std::to_string(kLlmcMagic) +
               " (give a text file for byte-level tokens, or an llm.c .bin)");
  TokenDataset d = from_text(bytes);
  d.source_ = path;
  return d;
}

TokenDataset TokenDataset::from_text(const std::string& text) {
  auto tokens = std::make_shared<std::vector<uint16_t>>(text.size());
  for (size_t i = 0; i < text.size(); ++i) (*tokens)[i] = static_cast<unsigned char>(text[i]);
  return TokenDataset(std::move(tokens), 256, Format::kBytes, "<text>");
}

TokenDataset TokenDataset::from_tokens(std::vector<uint16_t> tokens) {
  const int64_t vocab = vocab_of(tokens);
  return TokenDataset(std::make_shared<const std::vector<uint16_t>>(std::move(tokens)), vocab,
                      Format::kTokens, "<tokens>");
}

torch::Tensor TokenDataset::to_tensor() const {
  auto t = torch::empty({size()}, torch::kLong);
  auto* out = t.data_ptr<int64_t>();
  for (size_t i = 0; i < tokens_->size(); ++i) out[i] = (*tokens_)[i];
  return t;
}

std::string TokenDataset::describe() const {
  const char* kind = format_ == Format::kBytes ? "text bytes"
                     : format_ == Format::kLlmc ? "llm.c tokens"
                                                : "tokens";
  return source_ + " (" + kind + ", " + std::to_string(size()) + " tokens, vocab " +
         std::to_string(vocab_size_) + ")";
}

void write_llmc_tokens(const std::string& path, const std::vector<uint16_t>& tokens) {
  DS_CHECK(tokens.size() <= static_cast<size_t>(INT32_MAX), IoError,
           "write_llmc_tokens: " + std::to_string(tokens.size()) + " tokens exceed the int32 count");
  std::string b(kLlmcHeaderInts * 4 + 2 * tokens.size(), '\0');
  auto put_i32 = [&](size_t at, int32_t v) {
    for (int k = 0; k < 4; ++k) b[at + k] = static_cast<char>((static_cast<uint32_t>(v) >> (8 * k)) & 0xFF);
  };
  put_i32(0, kLlmcMagic);
  put_i32(4, kLlmcVersion);
  put_i32(8, static_cast<int32_t>(tokens.size()));
  for (size_t i = 0; i < tokens.size(); ++i) {
    b[kLlmcHeaderInts * 4 + 2 * i] = static_cast<char>(tokens[i] & 0xFF);
    b[kLlmcHeaderInts * 4 + 2 * i + 1] = static_cast<char>(tokens[i] >> 8);
  }
  FilePtr f(std::fopen(path.c_str(), "wb"), &std::fclose);
  DS_CHECK(f != nullptr, IoError, "cannot create \"" + path + "\": " + std::strerror(errno));
  DS_CHECK(std::fwrite(b.data(), 1, b.size(), f.get()) == b.size(), IoError,
           "cannot write \"" + path + "\": " + std::strerror(errno));
  DS_CHECK(std::fclose(f.release()) == 0, IoError,
           "cannot close \"" + path + "\": " + std::strerror(errno));
}

BatchSampler::BatchSampler(const TokenDataset& data, int64_t seq_len, uint64_t seed)
    : tokens_(data.tokens_), seq_len_(seq_len), seed_(seed) {
  DS_CHECK(seq_len >= 1, Error, "BatchSampler: seq_len must be >= 1, got " + std::to_string(seq_len));
  DS_CHECK(data.size() >= seq_len + 1, Error,
           "dataset " + data.describe() + " has " + std::to_string(data.size()) +
               " tokens, fewer than seq_len + 1 = " + std::to_string(seq_len + 1) +
               " (use more data or a shorter sequence)");
}

int64_t BatchSampler::offset(int64_t sample) const {
  // Windows start at 0 .. size - seq_len - 1 so that seq_len + 1 tokens (inputs + the shifted
  // target) fit. Hashing (seed, sample) rather than drawing from a stream keeps any sample
  // range computable on its own.
  const uint64_t windows = tokens_->size() - static_cast<uint64_t>(seq_len_);
  const uint64_t h = splitmix64(splitmix64(seed_) ^ static_cast<uint64_t>(sample));
  return static_cast<int64_t>(h % windows);
}

Batch BatchSampler::batch(int64_t first_sample, int64_t count) const {
  DS_CHECK(first_sample >= 0 && count >= 1, Error,
           "BatchSampler::batch: need first_sample >= 0 and count >= 1, got " +
               std::to_string(first_sample) + " and " + std::to_string(count));
  auto windows = torch::empty({count, seq_len_ + 1}, torch::kLong);  // [count, seq+1]
  auto* out = windows.data_ptr<int64_t>();
  const uint16_t* src = tokens_->data();
  for (int64_t s = 0; s < count; ++s) {
    const uint16_t* w = src + offset(first_sample + s);
    std::copy(w, w + seq_len_ + 1, out + s * (seq_len_ + 1));
  }
  using torch::indexing::Slice;
  return Batch{windows.index({Slice(), Slice(0, seq_len_)}).contiguous(),
               windows.index({Slice(), Slice(1, seq_len_ + 1)}).contiguous()};
}

}  // namespace ds::models
