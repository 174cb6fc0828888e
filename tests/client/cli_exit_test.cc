// The built binaries fail the project's way: exit status 1 and exactly one
// line `TOOL: reason` on stderr, for bad flags and for an unreachable server.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

namespace tributary {
namespace {

struct Result {
  int exit_status = -1;
  std::string out;
  std::string err;
};

// Runs `command` through the shell, stderr to a temporary file.
Result RunShell(const std::string& command) {
  const std::string err_path = testing::TempDir() + "/cli_exit_test_stderr.txt";
  Result result;
  FILE* pipe = popen((command + " 2>" + err_path).c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.out.append(buffer, n);
  }
  const int status = pclose(pipe);
  result.exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream err(err_path);
  std::stringstream contents;
  contents << err.rdbuf();
  result.err = contents.str();
  return result;
}

void ExpectOneLineFailure(const std::string& command, const std::string& tool,
                          const std::string& reason_part) {
  SCOPED_TRACE(command);
  Result result = RunShell(command);
  EXPECT_EQ(result.exit_status, 1);
  ASSERT_FALSE(result.err.empty());
  EXPECT_EQ(result.err.rfind(tool + ": ", 0), 0u) << result.err;
  EXPECT_EQ(result.err.find('\n'), result.err.size() - 1) << result.err;
  EXPECT_NE(result.err.find(reason_part), std::string::npos) << result.err;
}

const std::string kClient = TRIBUTARY_CLIENT_BINARY;
const std::string kLoad = TRIBUTARY_LOAD_BINARY;
// Nothing listens on port 1; the connection is refused at once.
const std::string kNowhere = " --target 127.0.0.1:1 --timeout 5";

TEST(CliExitTest, ClientBadArguments) {
  ExpectOneLineFailure(kClient, "tributary", "missing command");
  ExpectOneLineFailure(kClient + " nope", "tributary", "unknown command");
  ExpectOneLineFailure(kClient + " info --top-k 3", "tributary",
                       "info: unknown flag --top-k");
  ExpectOneLineFailure(kClient + " generate x --top-k many", "tributary",
                       "--top-k");
  ExpectOneLineFailure(kClient + " generate x --timeout -1", "tributary",
                       "--timeout");
  ExpectOneLineFailure(kClient + " generate x --steer 3:romeo:loud",
                       "tributary", "flag --steer '3:romeo:loud'");
  ExpectOneLineFailure(kClient + " chat x --ablate @/no/such/v.txt",
                       "tributary", "flag --ablate: cannot read");
  ExpectOneLineFailure(kClient + " generate x --lens-top 3", "tributary",
                       "flag --lens-top needs --lens");
  ExpectOneLineFailure(kClient + " generate x --tls-ca /no/such.pem",
                       "tributary", "/no/such.pem");
}

TEST(CliExitTest, ClientUnreachableServerNamesTheCode) {
  ExpectOneLineFailure(kClient + " info" + kNowhere, "tributary",
                       "tributary: UNAVAILABLE: ");
  ExpectOneLineFailure(kClient + " health" + kNowhere, "tributary",
                       "UNAVAILABLE");
}

TEST(CliExitTest, HelpExitsZero) {
  Result result = RunShell(kClient + " --help");
  EXPECT_EQ(result.exit_status, 0);
  EXPECT_NE(result.out.find("usage: tributary"), std::string::npos);
}

TEST(CliExitTest, LoadBadArguments) {
  ExpectOneLineFailure(kLoad + " --rate 2 --concurrency 2", "tributary-load",
                       "at most one");
  ExpectOneLineFailure(kLoad + " --rate 0", "tributary-load", "--rate");
  ExpectOneLineFailure(kLoad + " --max-in-flight 4", "tributary-load",
                       "needs --rate");
  ExpectOneLineFailure(kLoad + " --rate 1 --arrival bursty", "tributary-load",
                       "--arrival");
  ExpectOneLineFailure(kLoad + " --duration 0", "tributary-load", "--duration");
  ExpectOneLineFailure(kLoad + " --prompt x --prompt-tokens 3",
                       "tributary-load", "at most one");
  ExpectOneLineFailure(kLoad + " --request-id x", "tributary-load",
                       "unknown flag --request-id");
  ExpectOneLineFailure(kLoad + " extra", "tributary-load",
                       "unexpected argument");
  ExpectOneLineFailure(kLoad + " --cpu 100000", "tributary-load", "--cpu");
  ExpectOneLineFailure(kLoad + kNowhere, "tributary-load", "UNAVAILABLE");
}

}  // namespace
}  // namespace tributary
