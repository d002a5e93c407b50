// Python's number formatting, reimplemented from its rules (Python/pystrtod.c, format_float_short
// with mode 'r'): the shortest digits that round-trip, fixed notation while the decimal point sits
// within -4 < decpt <= 16, exponent notation ("d.ddde±XX", at least two exponent digits) outside.
#include "profiling/python_text.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <system_error>

#include "util/error.h"

namespace ds {

std::string python_float_repr(double x) {
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";

  // to_chars without a precision gives the shortest round-trip digits, like Python's dtoa mode 0.
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, x, std::chars_format::scientific);
  DS_ASSERT(res.ec == std::errc(), "to_chars failed on a finite double");
  const std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // "-1.2345e+02"

  const bool negative = sci.front() == '-';
  const size_t e_pos = sci.find('e');
  std::string digits;
  for (char c : sci.substr(negative ? 1 : 0, e_pos - (negative ? 1 : 0))) {
    if (c != '.') digits += c;
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + (sci[e_pos + 1] == '+' ? 2 : 1), sci.data() + sci.size(), exp10);
  const int decpt = exp10 + 1;  // digits "12345", decpt 3 → 123.45
  const int ndigits = static_cast<int>(digits.size());

  std::string out = negative ? "-" : "";
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (ndigits > 1) out += "." + digits.substr(1);
    char e[16];
    std::snprintf(e, sizeof e, "e%c%02d", exp10 < 0 ? '-' : '+', std::abs(exp10));
    out += e;
  } else if (decpt <= 0) {
    out += "0." + std::string(static_cast<size_t>(-decpt), '0') + digits;
  } else if (decpt >= ndigits) {
    out += digits + std::string(static_cast<size_t>(decpt - ndigits), '0') + ".0";
  } else {
    out += digits.substr(0, static_cast<size_t>(decpt)) + "." + digits.substr(static_cast<size_t>(decpt));
  }
  return out;
}

std::string python_value_text(const MonitorEvent& e) {
  if (e.kind == ValueKind::Int && std::isfinite(e.value) && e.value == std::trunc(e.value)) {
    // Exact decimal of the integral double (2**70 prints all its digits, as Python's int would).
    char buf[400];
    const auto res = std::to_chars(buf, buf + sizeof buf, e.value, std::chars_format::fixed, 0);
    DS_ASSERT(res.ec == std::errc(), "to_chars failed on an integral double");
    std::string s(buf, res.ptr);
    return s == "-0" ? "0" : s;
  }
  return python_float_repr(e.value);
}

std::string csv_field(std::string_view field) {
  if (field.find_first_of(",\"\r\n") == std::string_view::npos) return std::string(field);
  std::string out = "\"";
  for (char c : field) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

std::string json_string(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char u[8];
          std::snprintf(u, sizeof u, "\\u%04x", static_cast<unsigned char>(c));
          out += u;
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

}  // namespace ds
