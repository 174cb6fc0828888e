#include "base/cli.h"

#include <cstdio>
#include <exception>
#include <new>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace tributary {

absl::StatusOr<CliArgs> CliArgs::Parse(
    int argc, const char* const* argv, const std::set<std::string>& value_flags,
    const std::set<std::string>& bool_flags) {
  CliArgs args;
  bool only_positional = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (only_positional || arg.size() < 3 || arg.rfind("--", 0) != 0) {
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      args.positional_.push_back(arg);
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> inline_value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      inline_value = name.substr(eq + 1);
      name = name.substr(0, eq);
    }
    if (bool_flags.count(name)) {
      if (inline_value && *inline_value != "true" && *inline_value != "false") {
        return absl::InvalidArgumentError(absl::StrCat(
            "flag --", name, " takes no value (or =true/=false), got '",
            *inline_value, "'"));
      }
      if (!inline_value || *inline_value == "true") {
        args.values_[name] = "true";
      } else {
        args.values_.erase(name);
      }
      continue;
    }
    if (value_flags.count(name)) {
      if (inline_value) {
        args.values_[name] = *inline_value;
      } else if (i + 1 < argc) {
        args.values_[name] = argv[++i];
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("flag --", name, " needs a value"));
      }
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
  }
  return args;
}

std::optional<std::string> CliArgs::Get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string CliArgs::GetOr(const std::string& name,
                           const std::string& fallback) const {
  auto value = Get(name);
  return value ? *value : fallback;
}

absl::StatusOr<long long> CliArgs::GetInt(const std::string& name,
                                          long long fallback, long long min,
                                          long long max) const {
  auto value = Get(name);
  if (!value) return fallback;
  long long parsed = 0;
  if (!absl::SimpleAtoi(*value, &parsed) || parsed < min || parsed > max) {
    return absl::InvalidArgumentError(absl::StrCat(
        "flag --", name, " must be an integer in [", min, ", ", max,
        "], got '", *value, "'"));
  }
  return parsed;
}

int RunCliMain(absl::string_view tool,
               const std::function<absl::Status()>& body) {
  std::string reason;
  try {
    absl::Status status = body();
    if (status.ok()) return 0;
    reason = std::string(status.message());
    if (reason.empty()) reason = status.ToString();
  } catch (const std::bad_alloc&) {
    reason = "out of memory";
  } catch (const std::exception& e) {
    reason = absl::StrCat("internal error: ", e.what());
  } catch (...) {
    reason = "internal error: unknown exception";
  }
  // One line, whatever the message contains.
  reason = absl::StrReplaceAll(reason, {{"\n", " "}, {"\r", " "}});
  std::fflush(stdout);
  std::fprintf(stderr, "%.*s: %s\n", static_cast<int>(tool.size()), tool.data(),
               reason.c_str());
  return 1;
}

int RunCliMain(absl::string_view tool, int argc, const char* const* argv,
               absl::string_view usage,
               const std::function<absl::Status()>& body) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      std::fwrite(usage.data(), 1, usage.size(), stdout);
      if (!usage.empty() && usage.back() != '\n') std::fputc('\n', stdout);
      return 0;
    }
  }
  return RunCliMain(tool, body);
}

}  // namespace tributary
