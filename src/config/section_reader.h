// Internal: typed, recorded access to one JSON object of the config. Each read checks the type and
// range, applies the "auto" rule (a value "auto" is treated as absent), records the resolved value
// with its source, and marks the key as known; finish() then reports the keys nobody read.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config.h"

namespace ds::config_detail {

using Json = nlohmann::json;

// Warnings and resolved values gathered while one config loads.
struct ParseContext {
  std::vector<std::string> warnings;
  std::map<std::string, ResolvedValue> resolved;
  // "auto" bookkeeping for the one warning about them (auto_values.cpp): keys whose "auto" got a
  // meaning (derived as Hugging Face's integration derives it), and sections written as "auto".
  std::set<std::string, std::less<>> auto_meaningful;
  std::vector<std::string> auto_sections;

  void warn(const std::string& message);  // recorded and logged once
  void record(const std::string& path, const Json& value, Source source);
};

enum class UnknownKeys { Error, Warn };

struct IntRange {
  int64_t min = std::numeric_limits<int64_t>::min();
  int64_t max = std::numeric_limits<int64_t>::max();
};
struct RealRange {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool min_exclusive = false;
};
// The largest finite fp32 (FLT_MAX): no real key may exceed it in magnitude.
inline constexpr double kFp32Max = static_cast<double>(std::numeric_limits<float>::max());
inline constexpr IntRange kNonNegative{0};
inline constexpr IntRange kPositive{1};
inline constexpr RealRange kNonNegativeReal{0.0};
inline constexpr RealRange kUnitInterval{0.0, 1.0};

bool is_auto(const Json& v);
std::string show(const Json& v);  // the value as JSON text for messages (long values cut)
std::string lower(std::string_view s);
std::optional<int64_t> as_integer(const Json& v);  // integral numbers, 5e8 included
std::string describe(const IntRange& r);           // " 0..3", " >= 0", ""
std::string describe(const RealRange& r);
[[noreturn]] void type_error(const std::string& path, const std::string& expected, const Json& got);

class SectionReader {
 public:
  // `section` may be nullptr, null or "auto" (all defaults), else it must be an object.
  SectionReader(ParseContext& ctx, const Json* section, std::string path, UnknownKeys unknown);

  const std::string& path() const { return path_; }
  std::string key_path(std::string_view key) const;
  bool present() const { return present_; }        // the section was an object in the file
  Source section_source() const { return section_source_; }
  ParseContext& ctx() { return ctx_; }

  // Where `key`'s value comes from (File, Auto or Default) without marking it read.
  Source source_of(std::string_view key) const;
  bool given(std::string_view key) const { return source_of(key) == Source::File; }
  // The raw value of a given key (nullptr if absent or "auto"); marks it known.
  const Json* take(std::string_view key);
  // The value of `key` as written ("auto" and null included), nullptr if absent; marks it known.
  // Sub-sections are built from this so that a section written as "auto" reports source auto.
  const Json* raw(std::string_view key);
  void mark_known(std::string_view key) { known_.emplace(key); }
  Json& object() { return obj_; }  // for alias rewrites before reading

  // `alias` is another accepted name of `key`; giving both is an error. `deprecated` warns.
  void alias(std::string_view key, std::string_view alias, bool deprecated);

  // Typed reads. `out` holds the default on entry; returns true when the file set it.
  bool read(std::string_view key, bool& out);
  bool read(std::string_view key, int& out, IntRange r);
  bool read(std::string_view key, int64_t& out, IntRange r = {});
  bool read(std::string_view key, double& out, RealRange r = {});
  bool read(std::string_view key, std::string& out);
  bool read(std::string_view key, std::optional<int64_t>& out, IntRange r = {});
  bool read(std::string_view key, std::optional<double>& out, RealRange r = {});
  bool read(std::string_view key, std::optional<std::string>& out);
  bool read(std::string_view key, std::optional<bool>& out);

  // An enum written as one of `names` (the first spelling of each value is canonical).
  template <typename E>
  bool read_enum(std::string_view key, E& out, std::initializer_list<std::pair<std::string_view, E>> names,
                 bool case_insensitive = false) {
    std::vector<std::string_view> spellings;
    for (const auto& n : names) spellings.push_back(n.first);
    Source src;
    const Json* v = lookup(key, src);
    if (v != nullptr) out = (names.begin() + match_name(key, *v, spellings, case_insensitive))->second;
    for (const auto& n : names) {
      if (n.second == out) {
        ctx_.record(key_path(key), Json(std::string(n.first)), src);
        break;
      }
    }
    return v != nullptr;
  }

  // Reports every key not read or marked known: an error or one warning each. `why` replaces the
  // default reason given in errors ("DeepSpeed validates <section> strictly").
  void finish(const std::string& why = "");

 private:
  const Json* lookup(std::string_view key, Source& src);
  int64_t to_int(std::string_view key, const Json& v, const IntRange& r, const char* also) const;
  double to_real(std::string_view key, const Json& v, const RealRange& r, const char* also) const;
  size_t match_name(std::string_view key, const Json& v, const std::vector<std::string_view>& names,
                    bool case_insensitive) const;

  ParseContext& ctx_;
  Json obj_ = Json::object();
  std::string path_;
  UnknownKeys unknown_;
  bool present_ = false;
  Source section_source_ = Source::Default;
  std::set<std::string, std::less<>> known_;
};

}  // namespace ds::config_detail
