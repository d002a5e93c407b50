// The error tree users see. Every failure a user, a config or the machine can cause throws one of
// these with a message that names the cause and the fix; internal invariants use DS_ASSERT.
#pragma once

#include <stdexcept>
#include <string>

namespace ds {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

// A config value is wrong. `path` is the JSON path ("zero_optimization.stage").
class ConfigError : public Error {
 public:
  ConfigError(std::string path, const std::string& message)
      : Error(path.empty() ? message : path + ": " + message), path_(std::move(path)) {}
  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

class CommError : public Error { using Error::Error; };
class IoError : public Error { using Error::Error; };
class OutOfMemory : public Error { using Error::Error; };
class NotSupported : public Error { using Error::Error; };

namespace detail {
[[noreturn]] void assert_fail(const char* cond, const char* file, int line, const std::string& msg);
}  // namespace detail

}  // namespace ds

// User-causable failure: throws `ErrorType` (a ds::Error subtype) with `msg`.
#define DS_CHECK(cond, ErrorType, msg)        \
  do {                                        \
    if (!(cond)) throw ErrorType(msg);        \
  } while (0)

// Internal invariant: a bug in deepspeed.cpp if it fires (throws, never aborts).
#define DS_ASSERT(cond, msg)                                                      \
  do {                                                                            \
    if (!(cond)) ::ds::detail::assert_fail(#cond, __FILE__, __LINE__, (msg));     \
  } while (0)
