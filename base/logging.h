// A tiny logger: one line per call on stderr, with a level and a UTC
// timestamp. Abseil 20220623 has no absl/log, and the engine must not depend
// on the server's choices, so this is all the engine uses.
//
// Thread safety: each call writes one line with a single write, so lines from
// different threads do not interleave.
#ifndef TRIBUTARY_BASE_LOGGING_H_
#define TRIBUTARY_BASE_LOGGING_H_

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace tributary {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };

// Messages below this level are dropped. Default kInfo. Set once in main.
void SetMinLogLevel(LogLevel level);
LogLevel MinLogLevel();

void LogLine(LogLevel level, absl::string_view message);
// A machine-readable line (e.g. one JSON object) written as is, with a
// newline, in one write(): no level or time prefix.
void LogRawLine(absl::string_view line);

template <typename... Args>
void LogInfo(const Args&... args) {
  if (MinLogLevel() <= LogLevel::kInfo) {
    LogLine(LogLevel::kInfo, absl::StrCat(args...));
  }
}
template <typename... Args>
void LogWarning(const Args&... args) {
  if (MinLogLevel() <= LogLevel::kWarning) {
    LogLine(LogLevel::kWarning, absl::StrCat(args...));
  }
}
template <typename... Args>
void LogError(const Args&... args) {
  LogLine(LogLevel::kError, absl::StrCat(args...));
}

}  // namespace tributary

#endif  // TRIBUTARY_BASE_LOGGING_H_
