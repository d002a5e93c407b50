// Python's text for the values DeepSpeed's monitors write, so our CSV files match its bytes:
// repr(float) (shortest round-trip digits, Python's switch to exponent form), str(int), and the
// csv module's minimal quoting. Also a JSON string escaper for the JSONL monitor.
#pragma once

#include <string>
#include <string_view>

#include "profiling/monitor.h"

namespace ds {

// repr(x) for a Python float: "0.5", "2.0", "1e-05", "1.2345678901234568e+17", "inf", "nan".
std::string python_float_repr(double x);

// The event's value as Python would print it: repr() for ValueKind::Float, str(int(x)) for
// ValueKind::Int (a non-integral or non-finite value marked Int falls back to the float repr).
std::string python_value_text(const MonitorEvent& e);

// One field as csv.writer (excel dialect, QUOTE_MINIMAL) writes it: quoted, with '"' doubled,
// when it holds ',', '"', '\r' or '\n'; otherwise unchanged.
std::string csv_field(std::string_view field);

// `s` as a JSON string literal, quotes included (UTF-8 passes through; controls are \u escaped).
std::string json_string(std::string_view s);

}  // namespace ds
