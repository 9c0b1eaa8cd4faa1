// Always-on assertions for programmer errors (a broken invariant, never bad input: bad input is a
// dagsim::Error thrown at the API boundary). Active in every build type, like SEASTAR_ASSERT and
// FoundationDB's ASSERT. A failure prints the condition, the place and any context registered by
// the runtime (the simulator registers the scenario and seed so the run can be replayed), then aborts.
#pragma once

#include <sstream>
#include <string>

namespace dagsim {

// Prints the failure and aborts. Never returns.
[[noreturn]] void assert_failed(const char* condition, const char* file, int line,
                                const std::string& detail);

// A line the assertion handler prints after a failure, e.g. "replay: dagsim run x.toml --seed 7".
// Set by whoever owns the process (the CLI, the simulator); empty by default.
void set_assert_context(std::string context);

namespace detail {
template <typename A, typename B>
std::string describe_pair(const A& a, const B& b) {
  std::ostringstream out;
  out << "left: " << a << ", right: " << b;
  return out.str();
}
}  // namespace detail

}  // namespace dagsim

#define DAGSIM_ASSERT(cond)                                            \
  do {                                                                 \
    if (!(cond)) [[unlikely]] {                                        \
      ::dagsim::assert_failed(#cond, __FILE__, __LINE__, std::string()); \
    }                                                                  \
  } while (0)

#define DAGSIM_ASSERT_MSG(cond, msg)                                   \
  do {                                                                 \
    if (!(cond)) [[unlikely]] {                                        \
      ::dagsim::assert_failed(#cond, __FILE__, __LINE__, (msg));       \
    }                                                                  \
  } while (0)

// Prints both sides on failure.
#define DAGSIM_ASSERT_EQ(a, b)                                                      \
  do {                                                                              \
    const auto& dagsim_a_ = (a);                                                    \
    const auto& dagsim_b_ = (b);                                                    \
    if (!(dagsim_a_ == dagsim_b_)) [[unlikely]] {                                   \
      ::dagsim::assert_failed(#a " == " #b, __FILE__, __LINE__,                     \
                              ::dagsim::detail::describe_pair(dagsim_a_, dagsim_b_)); \
    }                                                                               \
  } while (0)

#define DAGSIM_UNREACHABLE() \
  ::dagsim::assert_failed("unreachable", __FILE__, __LINE__, std::string())
