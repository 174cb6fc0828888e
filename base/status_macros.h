// Status propagation macros. Abseil 20220623 (Debian 12) ships no status
// macros, so the project keeps these two, and only these two.
#ifndef TRIBUTARY_BASE_STATUS_MACROS_H_
#define TRIBUTARY_BASE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TRIBUTARY_STATUS_CONCAT_INNER_(a, b) a##b
#define TRIBUTARY_STATUS_CONCAT_(a, b) TRIBUTARY_STATUS_CONCAT_INNER_(a, b)

// Evaluates `expr` (an absl::Status); returns it from the enclosing function
// when it is not OK.
#define RETURN_IF_ERROR(expr)                                         \
  do {                                                                \
    ::absl::Status tributary_status_ = (expr);                        \
    if (!tributary_status_.ok()) return tributary_status_;            \
  } while (0)

// ASSIGN_OR_RETURN(lhs, expr): evaluates `expr` (an absl::StatusOr<T>);
// returns its status when not OK, otherwise moves the value into `lhs`
// (which may be a declaration, e.g. `auto x`).
#define ASSIGN_OR_RETURN(lhs, expr)                                         \
  ASSIGN_OR_RETURN_IMPL_(                                                   \
      TRIBUTARY_STATUS_CONCAT_(tributary_statusor_, __LINE__), lhs, expr)

#define ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                           \
  if (!statusor.ok()) return statusor.status();     \
  lhs = std::move(statusor).value()

#endif  // TRIBUTARY_BASE_STATUS_MACROS_H_
