// The command line of `tributary`: `tributary [FLAGS] COMMAND [FLAGS] ARGS`.
// Common flags may come before or after the command; a command accepts the
// common flags and its own, and an unknown one is an error that names the
// command. Some value flags may repeat (`--stop A --stop B`), which CliArgs
// does not support: they are taken out of argv before CliArgs sees the rest.
#ifndef TRIBUTARY_CLIENT_COMMAND_LINE_H_
#define TRIBUTARY_CLIENT_COMMAND_LINE_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "base/cli.h"

namespace tributary {

struct CommandSpec {
  std::string name;
  // Besides the common value flags.
  std::set<std::string> value_flags;
  std::set<std::string> bool_flags;
  // Value flags that may be given several times, in order.
  std::set<std::string> repeated_flags;
};

class CommandLine {
 public:
  // Finds the command (the first positional argument) among `commands`, then
  // parses the rest with the common flags and that command's flags. A flag
  // that is a value flag for one command must not be a bool flag of
  // another (the command is only known after the first pass). Errors: no
  // command, an unknown command (the message lists them), an unknown flag
  // ("COMMAND: unknown flag --x"), a missing value.
  static absl::StatusOr<CommandLine> Parse(
      int argc, const char* const* argv,
      const std::set<std::string>& common_value_flags,
      const std::set<std::string>& common_bool_flags,
      const std::vector<CommandSpec>& commands);

  const std::string& command() const { return command_; }
  // The flags and the positional arguments after the command name.
  const CliArgs& args() const { return args_; }
  // The values of a repeated flag in command-line order (empty when absent).
  const std::vector<std::string>& Repeated(const std::string& name) const;

 private:
  CommandLine(std::string command, CliArgs args,
              std::map<std::string, std::vector<std::string>> repeated)
      : command_(std::move(command)),
        args_(std::move(args)),
        repeated_(std::move(repeated)) {}

  std::string command_;
  CliArgs args_;
  std::map<std::string, std::vector<std::string>> repeated_;
};

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_COMMAND_LINE_H_
