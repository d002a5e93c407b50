// Reading a Hugging Face config.json: typed fields with HF's defaults, and errors that name the
// field and the file (a missing required field, a wrong type, a value out of range).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace ds::models {

class HfJson {
 public:
  // `source` names the document in messages ("/ckpt/config.json"); `family` the model_type.
  HfJson(const nlohmann::json& j, std::string source, std::string family);

  // A field the model cannot be built without: ds::ConfigError when absent or not an integer.
  int64_t required_int(const std::string& key) const;
  // An optional field: `fallback` when absent or null; ConfigError when of the wrong type.
  int64_t get_int(const std::string& key, int64_t fallback) const;
  double get_double(const std::string& key, double fallback) const;
  bool get_bool(const std::string& key, bool fallback) const;
  std::string get_string(const std::string& key, const std::string& fallback) const;
  // Absent → `absent`; present but null → nullopt; an integer → its value.
  std::optional<int64_t> get_nullable_int(const std::string& key, std::optional<int64_t> absent) const;

  // A token id field that HF allows as an integer, a list of integers (Llama 3's eos_token_id) or
  // null: returned as it is written; `fallback` when absent; ConfigError for anything else.
  nlohmann::json get_token_ids(const std::string& key, const nlohmann::json& fallback) const;

  bool has(const std::string& key) const { return j_.contains(key) && !j_.at(key).is_null(); }
  const nlohmann::json& json() const { return j_; }
  const std::string& source() const { return source_; }
  // ds::ConfigError(key, msg + " in <source>").
  [[noreturn]] void fail(const std::string& key, const std::string& msg) const;

 private:
  const nlohmann::json& j_;
  std::string source_;
  std::string family_;
};

}  // namespace ds::models
