#include "core/base/assert.h"

#include <cstdio>
#include <cstdlib>

namespace dagsim {

namespace {
std::string& assert_context() {
  static std::string context;
  return context;
}
}  // namespace

void set_assert_context(std::string context) { assert_context() = std::move(context); }

void assert_failed(const char* condition, const char* file, int line, const std::string& detail) {
  std::fprintf(stderr, "dagsim: assertion failed: %s at %s:%d\n", condition, file, line);
  if (!detail.empty()) std::fprintf(stderr, "dagsim:   %s\n", detail.c_str());
  if (!assert_context().empty()) std::fprintf(stderr, "dagsim:   %s\n", assert_context().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace dagsim
