// RETURN_IF_ERROR / ASSIGN_OR_RETURN for absl::Status and absl::StatusOr.
// abseil 20220623 (Debian 12) ships neither, so they live here, once.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define MOETUNE_CONCAT_INNER(a, b) a##b
#define MOETUNE_CONCAT(a, b) MOETUNE_CONCAT_INNER(a, b)

#define RETURN_IF_ERROR(expr)                          \
  do {                                                 \
    const ::absl::Status moetune_status_ = (expr);     \
    if (!moetune_status_.ok()) return moetune_status_; \
  } while (0)

#define ASSIGN_OR_RETURN(lhs, expr)                                         \
  MOETUNE_ASSIGN_OR_RETURN_IMPL(MOETUNE_CONCAT(moetune_or_, __LINE__), lhs, \
                                expr)

#define MOETUNE_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();      \
  lhs = std::move(tmp).value()
