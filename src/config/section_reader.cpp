// Internal: typed, recorded access to one JSON object of the config (see section_reader.h).
#include "config/section_reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <fmt/format.h>

#include "util/error.h"
#include "util/logging.h"

namespace ds::config_detail {

void ParseContext::warn(const std::string& message) {
  warnings.push_back(message);
  ds::log::warn("{}", message);
}

void ParseContext::record(const std::string& path, const Json& value, Source source) {
  resolved[path] = ResolvedValue{path, value.dump(), source};
}

bool is_auto(const Json& v) { return v.is_string() && v.get_ref<const std::string&>() == "auto"; }

std::string show(const Json& v) {
  std::string s = v.dump();
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::optional<int64_t> as_integer(const Json& v) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    // JSON has no integer syntax for 5e8; accept any float that is exactly an integer.
    const double d = v.get<double>();
    if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) >= 9.2e18) return std::nullopt;
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::string describe(const IntRange& r) {
  constexpr auto lo = std::numeric_limits<int64_t>::min();
  constexpr auto hi = std::numeric_limits<int64_t>::max();
  if (r.min == lo && r.max == hi) return "";
  if (r.max == hi) return fmt::format(" >= {}", r.min);
  if (r.min == lo) return fmt::format(" <= {}", r.max);
  return fmt::format(" {}..{}", r.min, r.max);
}

std::string describe(const RealRange& r) {
  auto num = [](double d) { return Json(d).dump(); };
  const bool has_min = std::isfinite(r.min), has_max = std::isfinite(r.max);
  if (has_min && has_max) return fmt::format(" in [{}, {}]", num(r.min), num(r.max));
  if (has_min) return fmt::format(" {} {}", r.min_exclusive ? ">" : ">=", num(r.min));
  if (has_max) return fmt::format(" <= {}", num(r.max));
  return "";
}

void type_error(const std::string& path, const std::string& expected, const Json& got) {
  throw ConfigError(path, "expected " + expected + ", got " + show(got));
}

namespace {

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

SectionReader::SectionReader(ParseContext& ctx, const Json* section, std::string path, UnknownKeys unknown)
    : ctx_(ctx), path_(std::move(path)), unknown_(unknown) {
  if (section == nullptr || section->is_null()) return;
  if (is_auto(*section)) {
    section_source_ = Source::Auto;
    ctx_.auto_sections.push_back(path_);
    return;
  }
  if (!section->is_object()) type_error(path_, "an object", *section);
  obj_ = *section;
  present_ = true;
  section_source_ = Source::File;
}

std::string SectionReader::key_path(std::string_view key) const {
  return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
}

Source SectionReader::source_of(std::string_view key) const {
  auto it = obj_.find(key);
  if (it == obj_.end()) return section_source_ == Source::Auto ? Source::Auto : Source::Default;
  return is_auto(*it) ? Source::Auto : Source::File;
}

const Json* SectionReader::lookup(std::string_view key, Source& src) {
  known_.emplace(key);
  src = source_of(key);
  if (src != Source::File) return nullptr;
  return &*obj_.find(key);
}

const Json* SectionReader::take(std::string_view key) {
  Source src;
  return lookup(key, src);
}

const Json* SectionReader::raw(std::string_view key) {
  known_.emplace(key);
  auto it = obj_.find(key);
  return it == obj_.end() ? nullptr : &*it;
}

void SectionReader::alias(std::string_view key, std::string_view alias, bool deprecated) {
  known_.emplace(alias);
  auto a = obj_.find(alias);
  if (a == obj_.end()) return;
  if (obj_.contains(key)) {
    throw ConfigError(key_path(alias), "given together with \"" + std::string(key) +
                                           "\", another name of the same setting; keep one");
  }
  if (deprecated) {
    ctx_.warn(key_path(alias) + ": deprecated, use \"" + std::string(key) + "\" (value taken as " +
              key_path(key) + ")");
  }
  obj_[std::string(key)] = *a;
  obj_.erase(a);
}

int64_t SectionReader::to_int(std::string_view key, const Json& v, const IntRange& r, const char* also) const {
  const auto i = as_integer(v);
  if (!i || *i < r.min || *i > r.max) type_error(key_path(key), "an integer" + describe(r) + also, v);
  return *i;
}

double SectionReader::to_real(std::string_view key, const Json& v, const RealRange& r, const char* also) const {
  if (!v.is_number()) type_error(key_path(key), "a number" + describe(r) + also, v);
  const double d = v.get<double>();
  // Every real key ends up in fp32 arithmetic (kernels, loss scale): beyond fp32's largest value
  // it would be inf there. JSON cannot write inf or NaN, but a config built in code can.
  if (!std::isfinite(d) || std::fabs(d) > kFp32Max) {
    throw ConfigError(key_path(key), "expected a number" + describe(r) + also + " that is finite in fp32 (magnitude <= " +
                                         Json(kFp32Max).dump() + "), got " +
                                         (std::isfinite(d) ? show(v) : std::string(std::isnan(d) ? "nan" : "inf")));
  }
  const bool low = r.min_exclusive ? d <= r.min : d < r.min;
  if (low || d > r.max) type_error(key_path(key), "a number" + describe(r) + also, v);
  return d;
}

bool SectionReader::read(std::string_view key, bool& out) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (!v->is_boolean()) type_error(key_path(key), "true or false", *v);
    out = v->get<bool>();
  }
  ctx_.record(key_path(key), out, src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, int64_t& out, IntRange r) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) out = to_int(key, *v, r, "");
  ctx_.record(key_path(key), out, src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, int& out, IntRange r) {
  r.min = std::max<int64_t>(r.min, std::numeric_limits<int>::min());
  r.max = std::min<int64_t>(r.max, std::numeric_limits<int>::max());
  int64_t wide = out;
  const bool set = read(key, wide, r);
  out = static_cast<int>(wide);
  return set;
}

bool SectionReader::read(std::string_view key, double& out, RealRange r) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) out = to_real(key, *v, r, "");
  ctx_.record(key_path(key), out, src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, std::string& out) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (!v->is_string()) type_error(key_path(key), "a string", *v);
    out = v->get<std::string>();
  }
  ctx_.record(key_path(key), out, src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, std::optional<int64_t>& out, IntRange r) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (v->is_null()) {
      out.reset();
    } else {
      out = to_int(key, *v, r, " or null");
    }
  }
  ctx_.record(key_path(key), out ? Json(*out) : Json(nullptr), src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, std::optional<double>& out, RealRange r) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (v->is_null()) {
      out.reset();
    } else {
      out = to_real(key, *v, r, " or null");
    }
  }
  ctx_.record(key_path(key), out ? Json(*out) : Json(nullptr), src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, std::optional<std::string>& out) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (v->is_null()) {
      out.reset();
    } else {
      if (!v->is_string()) type_error(key_path(key), "a string or null", *v);
      out = v->get<std::string>();
    }
  }
  ctx_.record(key_path(key), out ? Json(*out) : Json(nullptr), src);
  return v != nullptr;
}

bool SectionReader::read(std::string_view key, std::optional<bool>& out) {
  Source src;
  const Json* v = lookup(key, src);
  if (v != nullptr) {
    if (v->is_null()) {
      out.reset();
    } else {
      if (!v->is_boolean()) type_error(key_path(key), "true, false or null", *v);
      out = v->get<bool>();
    }
  }
  ctx_.record(key_path(key), out ? Json(*out) : Json(nullptr), src);
  return v != nullptr;
}

size_t SectionReader::match_name(std::string_view key, const Json& v, const std::vector<std::string_view>& names,
                                 bool case_insensitive) const {
  if (v.is_string()) {
    const std::string s = case_insensitive ? lower(v.get<std::string>()) : v.get<std::string>();
    for (size_t i = 0; i < names.size(); ++i) {
      if (s == (case_insensitive ? lower(names[i]) : std::string(names[i]))) return i;
    }
  }
  std::string allowed;
  for (const auto& n : names) allowed += (allowed.empty() ? "" : ", ") + Json(std::string(n)).dump();
  type_error(key_path(key), "one of " + allowed + (case_insensitive ? " (any case)" : ""), v);
}

void SectionReader::finish(const std::string& why) {
  for (const auto& [key, value] : obj_.items()) {
    if (known_.count(key) != 0) continue;
    std::string hint;
    size_t best = key.size() / 3 + 2;
    for (const auto& k : known_) {
      const size_t d = edit_distance(key, k);
      if (d < best) best = d, hint = " (did you mean \"" + k + "\"?)";
    }
    if (unknown_ == UnknownKeys::Warn) {
      ctx_.warn(key_path(key) + ": unknown key; ignored" + hint);
      continue;
    }
    std::string allowed;
    for (const auto& k : known_) allowed += (allowed.empty() ? "" : ", ") + k;
    const std::string reason = why.empty() ? "DeepSpeed validates \"" + path_ + "\" strictly" : why;
    throw ConfigError(key_path(key), "unknown key" + hint + "; " + reason + "; allowed keys: " + allowed);
  }
}

}  // namespace ds::config_detail
