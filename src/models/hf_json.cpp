#include "models/hf_json.h"

#include "util/error.h"

namespace ds::models {

HfJson::HfJson(const nlohmann::json& j, std::string source, std::string family)
    : j_(j), source_(std::move(source)), family_(std::move(family)) {
  if (!j_.is_object()) throw ConfigError("", source_ + ": a config.json must be a JSON object, got " + j_.type_name());
}

void HfJson::fail(const std::string& key, const std::string& msg) const {
  throw ConfigError(key, msg + " (in " + source_ + ")");
}

int64_t HfJson::required_int(const std::string& key) const {
  if (!has(key)) fail(key, "missing: a " + family_ + " config.json must give it");
  return get_int(key, 0);
}

int64_t HfJson::get_int(const std::string& key, int64_t fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  // 4096.0 is an integer written as a float (some exporters do that).
  if (v.is_number_float() && v.get<double>() == static_cast<double>(static_cast<int64_t>(v.get<double>())))
    return static_cast<int64_t>(v.get<double>());
  fail(key, "must be an integer, got " + v.dump());
}

double HfJson::get_double(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (!v.is_number()) fail(key, "must be a number, got " + v.dump());
  return v.get<double>();
}

bool HfJson::get_bool(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (!v.is_boolean()) fail(key, "must be true or false, got " + v.dump());
  return v.get<bool>();
}

std::string HfJson::get_string(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  const auto& v = j_.at(key);
  if (!v.is_string()) fail(key, "must be a string, got " + v.dump());
  return v.get<std::string>();
}

std::optional<int64_t> HfJson::get_nullable_int(const std::string& key, std::optional<int64_t> absent) const {
  if (!j_.contains(key)) return absent;
  if (j_.at(key).is_null()) return std::nullopt;
  return get_int(key, 0);
}

nlohmann::json HfJson::get_token_ids(const std::string& key, const nlohmann::json& fallback) const {
  if (!j_.contains(key)) return fallback;
  const auto& v = j_.at(key);
  bool ok = v.is_null() || v.is_number_integer();
  if (v.is_array()) {
    ok = true;
    for (const auto& e : v) ok = ok && e.is_number_integer();
  }
  if (!ok) fail(key, "must be a token id, a list of token ids or null, got " + v.dump());
  return v;
}

}  // namespace ds::models
