#include "util/error.h"

namespace ds::detail {

void assert_fail(const char* cond, const char* file, int line, const std::string& msg) {
  throw Error(std::string("internal error (please report): ") + msg + " [" + cond + " at " + file +
              ":" + std::to_string(line) + "]");
}

}  // namespace ds::detail
