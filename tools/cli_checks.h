// Range checks for the tools' numeric options, with messages a user reads: CLI11's own say
// "Value 0 not in range 0.000000 to 1797693134862315708145274237317043567980...". Each failure
// reads "--steps: must be a whole number from 1 to 1000000000, got 0" (CLI11 prefixes the option).
#pragma once

#include <CLI/CLI.hpp>

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace ds::tools {

// A whole number in [lo, hi]; `why` (optional) follows the range, e.g. "(0 means ...)".
inline CLI::Validator whole_number(int64_t lo, int64_t hi, std::string why = "") {
  const std::string range = std::to_string(lo) + " to " + std::to_string(hi);
  return CLI::Validator(
      [lo, hi, range, why](std::string& text) -> std::string {
        errno = 0;
        char* end = nullptr;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        const bool whole = !text.empty() && end != nullptr && *end == '\0' && errno == 0;
        if (whole && v >= lo && v <= hi) return "";
        return "must be a whole number from " + range + ", got " + text + (why.empty() ? "" : " " + why);
      },
      "INT in [" + range + "]");
}

// A finite real number in [lo, hi].
inline CLI::Validator real_number(double lo, double hi, std::string why = "") {
  return CLI::Validator(
      [lo, hi, why](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        const bool number = !text.empty() && end != nullptr && *end == '\0' && std::isfinite(v);
        if (number && v >= lo && v <= hi) return "";
        char range[96];
        std::snprintf(range, sizeof range, "%g to %g", lo, hi);
        return "must be a number from " + std::string(range) + ", got " + text + (why.empty() ? "" : " " + why);
      },
      "NUMBER");
}

}  // namespace ds::tools
