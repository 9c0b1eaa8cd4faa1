#include "core/base/error.h"

#include <utility>

namespace dagsim {

namespace {
struct Row {
  ErrorCode code;
  std::string_view name;
  std::string_view description;
};
constexpr Row kRows[] = {
#define DAGSIM_ERROR(name, code, description) {ErrorCode::name, #name, description},
#include "core/base/errors.def"
#undef DAGSIM_ERROR
};

const Row* find_row(int32_t value) {
  for (const Row& row : kRows) {
    if (static_cast<int32_t>(row.code) == value) return &row;
  }
  return nullptr;
}
}  // namespace

std::string_view error_name(ErrorCode code) {
  const Row* row = find_row(static_cast<int32_t>(code));
  return row ? row->name : std::string_view("unknown_error");
}

std::string_view error_description(ErrorCode code) {
  const Row* row = find_row(static_cast<int32_t>(code));
  return row ? row->description : std::string_view("Unknown error");
}

std::optional<ErrorCode> error_code_from_int(int32_t value) {
  const Row* row = find_row(value);
  if (!row) return std::nullopt;
  return row->code;
}

Error::Error(ErrorCode code, std::string detail) : code_(code), detail_(std::move(detail)) {
  what_ = std::string(error_description(code_));
  if (!detail_.empty()) {
    what_ += ": ";
    what_ += detail_;
  }
}

bool is_error(const std::exception_ptr& e, ErrorCode code) {
  if (!e) return false;
  try {
    std::rethrow_exception(e);
  } catch (const Error& error) {
    return error.code() == code;
  } catch (...) {
    return false;
  }
}

}  // namespace dagsim
