#include "client/model_commands.h"

#include <grpcpp/client_context.h>

#include <cstdio>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/generate_flags.h"
#include "client/residual_table.h"
#include "client/status_names.h"
#include "base/status_macros.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {
namespace {

absl::Status NoArguments(const CommandLine& line) {
  if (line.args().positional().empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(line.command(), ": unexpected argument '",
                   line.args().positional()[0], "'"));
}

std::string Bytes(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB"};
  std::string out = absl::StrCat(bytes);
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024.0 && unit < 3) {
    value /= 1024.0;
    ++unit;
  }
  if (unit >= 0) {
    absl::StrAppend(&out, absl::StrFormat(" (%.1f %s)", value, kUnits[unit]));
  }
  return out;
}

// "0-2 linear_attention, 3 full_attention, …": 64 layer types in one
// readable line.
std::string LayerRuns(const v1::ModelInfo& info) {
  std::vector<std::string> runs;
  const int n = info.layer_types_size();
  for (int start = 0; start < n;) {
    int end = start;
    while (end + 1 < n &&
           info.layer_types(end + 1) == info.layer_types(start)) {
      ++end;
    }
    runs.push_back(
        end == start
            ? absl::StrCat(start, " ", info.layer_types(start))
            : absl::StrCat(start, "-", end, " ", info.layer_types(start)));
    start = end + 1;
  }
  return runs.empty() ? "-" : absl::StrJoin(runs, ", ");
}

// Escapes what a terminal would hide or garble (control bytes, quotes,
// backslashes) and keeps the rest, so that UTF-8 pieces such as "Ġworld"
// stay readable (absl::CEscape would print every non-ASCII byte in octal).
std::string EscapePiece(const std::string& piece) {
  std::string out;
  for (char c : piece) {
    const unsigned char byte = static_cast<unsigned char>(c);
    switch (c) {
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      default:
        if (byte < 0x20 || byte == 0x7f) {
          out += absl::StrFormat("\\x%02x", byte);
        } else {
          out += c;
        }
    }
  }
  return out;
}

}  // namespace

CommandSpec TokenizeCommandSpec() {
  return CommandSpec{
      "tokenize", {"system", "enable-thinking"}, {"pieces", "chat"}, {}};
}

CommandSpec InfoCommandSpec() { return CommandSpec{"info", {}, {}, {}}; }

CommandSpec StatsCommandSpec() {
  return CommandSpec{"stats", {"window"}, {}, {}};
}

std::string RenderTokens(const v1::TokenizeResponse& response, bool pieces) {
  if (!pieces)
    return absl::StrCat(absl::StrJoin(response.token_ids(), ","), "\n");
  std::string out = absl::StrFormat("%5s %8s  %s\n", "index", "id", "piece");
  for (int i = 0; i < response.token_ids_size(); ++i) {
    const std::string piece =
        i < response.pieces_size() ? response.pieces(i) : std::string();
    absl::StrAppend(
        &out, absl::StrFormat("%5d %8d  \"%s\"\n", i, response.token_ids(i),
                              EscapePiece(piece)));
  }
  return out;
}

std::string RenderModelInfo(const v1::ModelInfo& info) {
  std::string out;
  auto line = [&out](absl::string_view key, const auto& value) {
    absl::StrAppend(&out, key, ": ", value, "\n");
  };
  line("model_name", info.model_name());
  line("model_type", info.model_type());
  line("backend", info.backend());
  line("server_version", info.server_version());
  line("num_layers", info.num_layers());
  line("layer_types", LayerRuns(info));
  line("hidden_size", info.hidden_size());
  line("vocab_size", info.vocab_size());
  line("context_tokens", info.context_tokens());
  line("eos_token_ids", absl::StrJoin(info.eos_token_ids(), ","));
  line("has_tokenizer", info.has_tokenizer() ? "true" : "false");
  line("num_kv_blocks", info.num_kv_blocks());
  line("kv_block_tokens", info.kv_block_tokens());
  line("kv_block_bytes", Bytes(info.kv_block_bytes()));
  line("num_state_slots", info.num_state_slots());
  line("state_slot_bytes", Bytes(info.state_slot_bytes()));
  line("max_prompt_tokens", info.max_prompt_tokens());
  line("max_new_tokens", info.max_new_tokens());
  line("max_waiting_requests", info.max_waiting_requests());
  line("residual_stats_enabled",
       info.residual_stats_enabled() ? "true" : "false");
  line("residual_max_window_seconds",
       absl::StrFormat("%g", info.residual_max_window_seconds()));
  line("steering_vector_names",
       info.steering_vector_names().empty()
           ? std::string("-")
           : absl::StrJoin(info.steering_vector_names(), ", "));
  return out;
}

absl::Status RunTokenizeCommand(const CommandLine& line,
                                const ChannelOptions& options,
                                const std::shared_ptr<grpc::Channel>& channel) {
  const CliArgs& args = line.args();
  if (args.positional().size() != 1) {
    return absl::InvalidArgumentError(
        "tokenize: exactly one argument expected (the quoted TEXT)");
  }
  v1::TokenizeRequest request;
  if (args.Has("chat")) {
    absl::Status chat =
        BuildChatInput(args, args.positional()[0], request.mutable_chat());
    if (!chat.ok()) return chat;
  } else {
    if (args.Has("system")) {
      return absl::InvalidArgumentError("tokenize: --system needs --chat");
    }
    request.set_text(args.positional()[0]);
  }
  request.set_return_pieces(args.Has("pieces"));
  auto stub = v1::Tributary::NewStub(channel);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);
  v1::TokenizeResponse response;
  RETURN_IF_ERROR(RpcError(stub->Tokenize(&context, request, &response)));
  std::fputs(RenderTokens(response, args.Has("pieces")).c_str(), stdout);
  return absl::OkStatus();
}

absl::Status RunInfoCommand(const CommandLine& line,
                            const ChannelOptions& options,
                            const std::shared_ptr<grpc::Channel>& channel) {
  RETURN_IF_ERROR(NoArguments(line));
  auto stub = v1::Tributary::NewStub(channel);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);
  v1::ModelInfo info;
  RETURN_IF_ERROR(
      RpcError(stub->GetModelInfo(&context, v1::GetModelInfoRequest(), &info)));
  std::fputs(RenderModelInfo(info).c_str(), stdout);
  return absl::OkStatus();
}

absl::Status RunStatsCommand(const CommandLine& line,
                             const ChannelOptions& options,
                             const std::shared_ptr<grpc::Channel>& channel) {
  RETURN_IF_ERROR(NoArguments(line));
  v1::GetResidualStatsRequest request;
  if (auto window = line.args().Get("window")) {
    // 0 is the server's default (60 s); the server checks the upper bound.
    ASSIGN_OR_RETURN(double seconds, ParsePositiveDouble("window", *window));
    request.set_window_seconds(seconds);
  }
  auto stub = v1::Tributary::NewStub(channel);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);
  v1::ResidualStats stats;
  RETURN_IF_ERROR(RpcError(stub->GetResidualStats(&context, request, &stats)));
  std::fputs(RenderResidualStats(stats, RatioChartOptions()).c_str(), stdout);
  return absl::OkStatus();
}

}  // namespace tributary
