// The shared shape of every command-line tool of the project:
//   - flags are parsed by CliArgs (`--name VALUE`, `--name=VALUE`, `--flag`),
//     unknown flags and missing values are errors;
//   - RunCliMain runs the tool's body and turns any failure (a Status, or an
//     escaped exception such as std::bad_alloc) into exit status 1 with one
//     line `TOOL: reason` on stderr. Never a signal or an abort. Given the
//     tool's usage, it answers --help with it (exit status 0).
#ifndef TRIBUTARY_BASE_CLI_H_
#define TRIBUTARY_BASE_CLI_H_

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tributary {

class CliArgs {
 public:
  // `value_flags` take a value; `bool_flags` do not. Names without "--".
  static absl::StatusOr<CliArgs> Parse(int argc, const char* const* argv,
                                       const std::set<std::string>& value_flags,
                                       const std::set<std::string>& bool_flags);

  bool Has(const std::string& name) const { return values_.count(name) > 0; }
  std::optional<std::string> Get(const std::string& name) const;
  std::string GetOr(const std::string& name, const std::string& fallback) const;
  // Parses the flag as an integer in [min, max]; errors name the flag.
  absl::StatusOr<long long> GetInt(const std::string& name, long long fallback,
                                   long long min, long long max) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

// Runs `body`; returns the process exit status (0, or 1 with one line on
// stderr). `tool` is the name printed before the reason.
int RunCliMain(absl::string_view tool, const std::function<absl::Status()>& body);

// As above, after answering `--help` or `-h` among the arguments with
// `usage` on stdout and exit status 0, before the body parses anything.
int RunCliMain(absl::string_view tool, int argc, const char* const* argv,
               absl::string_view usage,
               const std::function<absl::Status()>& body);

}  // namespace tributary

#endif  // TRIBUTARY_BASE_CLI_H_
