// Python's number text: hard-coded repr() values (from CPython's documented rules: shortest
// round-trip digits, exponent form when the decimal exponent is < -4 or >= 16), the csv module's
// quoting, and, where /usr/bin/python3 exists, repr() itself over a few thousand doubles.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "profiling/python_text.h"
#include "profiling_test_util.h"

namespace ds::test {
namespace {

TEST(PythonText, FloatReprMatchesCPython) {
  const std::pair<double, const char*> cases[] = {
      {0.5, "0.5"}, {2.0, "2.0"}, {10.0, "10.0"}, {0.0, "0.0"}, {-0.0, "-0.0"}, {0.1, "0.1"},
      {1.0 / 3.0, "0.3333333333333333"}, {0.001, "0.001"}, {0.0001, "0.0001"}, {0.00001, "1e-05"},
      {1.5e-7, "1.5e-07"}, {123456789.123, "123456789.123"}, {1e15, "1000000000000000.0"},
      {1e16, "1e+16"}, {9999999999999998.0, "9999999999999998.0"}, {1.2345678901234568e+17, "1.2345678901234568e+17"},
      {1e22, "1e+22"}, {1e100, "1e+100"}, {65536.0, "65536.0"}, {-2.5, "-2.5"}, {3e-4, "0.0003"},
      {5e-324, "5e-324"}, {1.7976931348623157e308, "1.7976931348623157e+308"}, {12.345678, "12.345678"},
      {std::numeric_limits<double>::infinity(), "inf"}, {-std::numeric_limits<double>::infinity(), "-inf"},
      {std::nan(""), "nan"}, {-std::nan(""), "nan"}};
  for (const auto& [x, want] : cases) EXPECT_EQ(python_float_repr(x), want) << want;
}

TEST(PythonText, IntKindPrintsLikePythonInt) {
  EXPECT_EQ(python_value_text({"t", 65536.0, 0, ValueKind::Int}), "65536");
  EXPECT_EQ(python_value_text({"t", -3.0, 0, ValueKind::Int}), "-3");
  EXPECT_EQ(python_value_text({"t", -0.0, 0, ValueKind::Int}), "0");
  EXPECT_EQ(python_value_text({"t", std::ldexp(1.0, 70), 0, ValueKind::Int}), "1180591620717411303424");
  EXPECT_EQ(python_value_text({"t", 65536.0, 0, ValueKind::Float}), "65536.0");
  EXPECT_EQ(python_value_text({"t", 2.5, 0, ValueKind::Int}), "2.5");  // not integral: the float text
}

TEST(PythonText, CsvQuotingIsMinimal) {
  EXPECT_EQ(csv_field("train_loss"), "train_loss");
  EXPECT_EQ(csv_field("a b"), "a b");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
  EXPECT_EQ(csv_field("two\nlines"), "\"two\nlines\"");
  EXPECT_EQ(csv_field(""), "");
}

TEST(PythonText, JsonStringEscapes) {
  EXPECT_EQ(json_string("Train/Samples/lr"), "\"Train/Samples/lr\"");
  EXPECT_EQ(json_string("a\"b\\c\n\x01"), "\"a\\\"b\\\\c\\n\\u0001\"");
  EXPECT_EQ(json_string("\xc3\xbc"), "\"\xc3\xbc\"");  // UTF-8 passes through
}

TEST(PythonText, FloatReprAgreesWithPythonOnThousandsOfValues) {
  if (!python_has("sys")) GTEST_SKIP() << kPython << " is not installed";
  std::mt19937_64 rng(1234);
  std::vector<double> xs = {0.1, 0.2, 0.3, 1e-4, 9.999999999999999e-5, 1e16, 9.999999999999999e15, 5e-324,
                            2.2250738585072014e-308, 123.456, 1.0 / 3.0, 2.0 / 3.0, 100.0, 1e-10};
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-30, 30);
  for (int i = 0; i < 3000; ++i) xs.push_back((i % 2 ? -1.0 : 1.0) * unit(rng) * std::pow(10.0, exponent(rng)));
  for (int i = 0; i < 1000; ++i) {  // raw bit patterns cover every exponent, subnormals included
    uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, 8);
    if (std::isfinite(x)) xs.push_back(x);
  }
  for (int i = 0; i < 200; ++i) xs.push_back(static_cast<double>(static_cast<float>(unit(rng))));  // float32 values
  TempDir dir;
  std::string hex;
  for (double x : xs) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%a\n", x);
    hex += buf;
  }
  write_file(dir.file("values.hex"), hex);
  const auto [rc, out] = run_python_script(dir, "python_repr_reference.py", dir.file("values.hex"));
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  size_t i = 0, mismatches = 0;
  for (; std::getline(lines, line) && i < xs.size(); ++i) {
    if (python_float_repr(xs[i]) != line && ++mismatches <= 10) {
      ADD_FAILURE() << "repr of " << std::hexfloat << xs[i] << ": python " << line << ", ours " << python_float_repr(xs[i]);
    }
  }
  EXPECT_EQ(i, xs.size());
  EXPECT_EQ(mismatches, 0u);
}

}  // namespace
}  // namespace ds::test
