#include "client/command_line.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/status_macros.h"

namespace tributary {
namespace {

// argv with the repeated flags and the command name taken out.
struct SplitArgv {
  std::vector<std::string> rest;  // rest[0] is the program name
  std::string command;            // empty when there is none
  std::map<std::string, std::vector<std::string>> repeated;
};

// Walks argv with CliArgs' grammar (`--name VALUE`, `--name=VALUE`, `--flag`,
// `--` ends the flags, anything shorter than 3 characters or not starting
// with `--` is positional), so that a value that looks like a flag, or a
// command name given as a flag's value, is never mistaken.
absl::StatusOr<SplitArgv> Split(int argc, const char* const* argv,
                                const std::set<std::string>& value_flags,
                                const std::set<std::string>& repeated_flags) {
  SplitArgv split;
  split.rest.push_back(argc > 0 ? argv[0] : "tributary");
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const bool is_flag =
        !only_positional && arg.size() >= 3 && arg.rfind("--", 0) == 0;
    if (!is_flag) {
      if (!only_positional && arg == "--") {
        only_positional = true;
        split.rest.push_back(arg);
      } else if (split.command.empty()) {
        split.command = arg;
      } else {
        split.rest.push_back(arg);
      }
      continue;
    }
    std::string name = arg.substr(2);
    const size_t eq = name.find('=');
    const bool has_inline_value = eq != std::string::npos;
    if (has_inline_value) name = name.substr(0, eq);
    if (repeated_flags.count(name)) {
      if (has_inline_value) {
        split.repeated[name].push_back(arg.substr(2 + eq + 1));
      } else if (i + 1 < argc) {
        split.repeated[name].push_back(argv[++i]);
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      continue;
    }
    split.rest.push_back(arg);
    if (!has_inline_value && value_flags.count(name) && i + 1 < argc) {
      split.rest.push_back(argv[++i]);
    }
  }
  return split;
}

}  // namespace

absl::StatusOr<CommandLine> CommandLine::Parse(
    int argc, const char* const* argv,
    const std::set<std::string>& common_value_flags,
    const std::set<std::string>& common_bool_flags,
    const std::vector<CommandSpec>& commands) {
  // First pass: every flag any command knows, to find the command.
  std::set<std::string> all_values = common_value_flags;
  std::set<std::string> all_repeated;
  std::vector<std::string> names;
  for (const CommandSpec& spec : commands) {
    all_values.insert(spec.value_flags.begin(), spec.value_flags.end());
    all_repeated.insert(spec.repeated_flags.begin(), spec.repeated_flags.end());
    names.push_back(spec.name);
  }
  ASSIGN_OR_RETURN(SplitArgv split,
                   Split(argc, argv, all_values, all_repeated));
  if (split.command.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "missing command (one of ", absl::StrJoin(names, ", "), ")"));
  }
  const CommandSpec* spec = nullptr;
  for (const CommandSpec& candidate : commands) {
    if (candidate.name == split.command) spec = &candidate;
  }
  if (spec == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown command '", split.command, "' (one of ",
                     absl::StrJoin(names, ", "), ")"));
  }
  for (const auto& [name, values] : split.repeated) {
    if (!spec->repeated_flags.count(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat(spec->name, ": unknown flag --", name));
    }
  }

  // Second pass: only what this command accepts.
  std::set<std::string> value_flags = common_value_flags;
  value_flags.insert(spec->value_flags.begin(), spec->value_flags.end());
  std::set<std::string> bool_flags = common_bool_flags;
  bool_flags.insert(spec->bool_flags.begin(), spec->bool_flags.end());
  std::vector<const char*> rest;
  for (const std::string& arg : split.rest) rest.push_back(arg.c_str());
  absl::StatusOr<CliArgs> args = CliArgs::Parse(
      static_cast<int>(rest.size()), rest.data(), value_flags, bool_flags);
  if (!args.ok()) {
    return absl::Status(
        args.status().code(),
        absl::StrCat(spec->name, ": ", args.status().message()));
  }
  return CommandLine(spec->name, *std::move(args), std::move(split.repeated));
}

const std::vector<std::string>& CommandLine::Repeated(
    const std::string& name) const {
  static const auto* const kEmpty = new std::vector<std::string>();
  auto it = repeated_.find(name);
  return it == repeated_.end() ? *kEmpty : it->second;
}

}  // namespace tributary
