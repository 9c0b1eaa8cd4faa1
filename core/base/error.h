// dagsim::Error is the one type of operating error (a peer gone, a timeout, bad input): an
// exception carrying a code from errors.def plus a detail string. Futures carry it across fibers
// and the wire carries (code, detail), so a caller on another node can react to the same code.
// Programmer errors are not Errors: they are DAGSIM_ASSERT failures (assert.h).
#pragma once

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

namespace dagsim {

enum class ErrorCode : int32_t {
#define DAGSIM_ERROR(name, code, description) name = code,
#include "core/base/errors.def"
#undef DAGSIM_ERROR
};

// The row's name ("timed_out") and description ("Operation timed out").
std::string_view error_name(ErrorCode code);
std::string_view error_description(ErrorCode code);
// For decoding codes off the wire: nullopt when the number is not a row of the table.
std::optional<ErrorCode> error_code_from_int(int32_t value);

class Error : public std::exception {
 public:
  Error(ErrorCode code, std::string detail);

  ErrorCode code() const { return code_; }
  const std::string& detail() const { return detail_; }
  // "<description>: <detail>", or just the description when there is no detail.
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  ErrorCode code_;
  std::string detail_;
  std::string what_;
};

// Factories named after the rows, as FoundationDB's `throw timed_out();`.
#define DAGSIM_ERROR(name, code, description) \
  inline Error name(std::string detail = {}) { return Error(ErrorCode::name, std::move(detail)); }
namespace errors {
#include "core/base/errors.def"
}  // namespace errors
#undef DAGSIM_ERROR

// True when `e` holds a dagsim::Error with this code.
bool is_error(const std::exception_ptr& e, ErrorCode code);

}  // namespace dagsim
