#include "client/generate_command.h"

#include <grpcpp/client_context.h>

#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "client/generate_flags.h"
#include "client/intervention_flags.h"
#include "client/lens_table.h"
#include "client/residual_table.h"
#include "client/status_names.h"
#include "base/status_macros.h"
#include "tributary/v1/tributary.grpc.pb.h"

namespace tributary {
namespace {

void WriteOut(const std::string& text) {
  std::fwrite(text.data(), 1, text.size(), stdout);
  // Flushed per delta: the point of streaming is to see tokens as they come,
  // also when stdout is a pipe.
  std::fflush(stdout);
}

void WriteVerbose(const CliArgs& args, const grpc::ClientContext& context,
                  const v1::GenerateResponse& last) {
  if (!args.Has("verbose")) return;
  std::string out = DescribeFinish(last);
  const auto& metadata = context.GetServerInitialMetadata();
  auto it = metadata.find("x-request-id");
  if (it != metadata.end()) {
    absl::StrAppend(&out, "request_id: ",
                    std::string(it->second.data(), it->second.size()), "\n");
  }
  if (last.has_residual_summary()) {
    absl::StrAppend(
        &out, "\nresidual summary of this request:\n",
        RenderResidualStats(last.residual_summary(), RatioChartOptions()));
  }
  std::fputs(out.c_str(), stderr);
}

// The prompt's ids and texts, for the rows of prompt positions
// (--lens-prompt): from --ids, else one Tokenize call on the same input. Left
// unknown when that call fails: the rows then show no next token.
void AddPromptTokens(const v1::GenerateRequest& request,
                     const ChannelOptions& options, v1::Tributary::Stub* stub,
                     LensData* lens) {
  if (request.has_token_ids()) {
    lens->prompt_ids.assign(request.token_ids().ids().begin(),
                            request.token_ids().ids().end());
    return;
  }
  v1::TokenizeRequest tokenize;
  if (request.has_chat()) {
    *tokenize.mutable_chat() = request.chat();
  } else {
    tokenize.set_text(request.text());
  }
  tokenize.set_return_pieces(true);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);
  v1::TokenizeResponse response;
  if (!stub->Tokenize(&context, tokenize, &response).ok()) return;
  lens->prompt_ids.assign(response.token_ids().begin(),
                          response.token_ids().end());
  for (int i = 0; i < response.pieces_size() && i < response.token_ids_size();
       ++i) {
    lens->texts.emplace(response.token_ids(i),
                        ByteLevelPieceText(response.pieces(i)));
  }
}

// After the text: the logit-lens table (--lens), a blank line before it.
absl::Status WriteLens(const CommandLine& line, const ChannelOptions& options,
                       const v1::GenerateRequest& request,
                       v1::Tributary::Stub* stub, LensData* lens) {
  if (!request.has_logit_lens()) return absl::OkStatus();
  ASSIGN_OR_RETURN(int width, LensTableWidth(line.args()));
  if (request.logit_lens().include_prompt()) {
    AddPromptTokens(request, options, stub, lens);
  }
  WriteOut("\n" + RenderLensTable(*lens, width));
  return absl::OkStatus();
}

}  // namespace

std::string FinishReasonName(v1::FinishReason reason) {
  absl::string_view name = v1::FinishReason_Name(reason);
  if (name.empty())
    return absl::StrCat("FINISH_REASON_", static_cast<int>(reason));
  absl::ConsumePrefix(&name, "FINISH_REASON_");
  return std::string(name);
}

std::string DescribeFinish(const v1::GenerateResponse& last) {
  std::string out =
      absl::StrCat("finish_reason: ", FinishReasonName(last.finish_reason()));
  if (last.has_matched_stop_token_id()) {
    absl::StrAppend(&out, " (token ", last.matched_stop_token_id(), ")");
  }
  if (last.has_matched_stop_string()) {
    absl::StrAppend(&out, " (string \"", last.matched_stop_string(), "\")");
  }
  absl::StrAppend(&out, "\n");
  absl::StrAppend(&out, "usage: ", last.usage().prompt_tokens(),
                  " prompt tokens, ", last.usage().generated_tokens(),
                  " generated tokens\n");
  const v1::Timing& timing = last.timing();
  absl::StrAppend(
      &out,
      absl::StrFormat("timing: queue %.1f ms, time to first token %.1f ms, "
                      "total %.1f ms",
                      1e3 * timing.queue_seconds(),
                      1e3 * timing.time_to_first_token_seconds(),
                      1e3 * timing.total_seconds()));
  const int generated = last.usage().generated_tokens();
  const double decode_seconds =
      timing.total_seconds() - timing.time_to_first_token_seconds();
  if (generated > 1 && decode_seconds > 0) {
    absl::StrAppend(&out, absl::StrFormat(", %.1f tokens/s after the first",
                                          (generated - 1) / decode_seconds));
  }
  absl::StrAppend(&out, "\n");
  return out;
}

absl::Status RunGenerateCommand(const CommandLine& line,
                                const ChannelOptions& options,
                                const std::shared_ptr<grpc::Channel>& channel) {
  ASSIGN_OR_RETURN(v1::GenerateRequest request, BuildGenerateRequest(line));
  auto stub = v1::Tributary::NewStub(channel);
  grpc::ClientContext context;
  ConfigureClientContext(options, &context);

  if (line.args().Has("unary")) {
    v1::GenerateResponse response;
    grpc::Status status = stub->Generate(&context, request, &response);
    RETURN_IF_ERROR(RpcError(status));
    WriteOut(response.text() + "\n");
    LensData lens;
    AddLensMessage(response, &lens);
    RETURN_IF_ERROR(WriteLens(line, options, request, stub.get(), &lens));
    WriteVerbose(line.args(), context, response);
    return absl::OkStatus();
  }

  auto reader = stub->GenerateStream(&context, request);
  v1::GenerateResponse response, last;
  LensData lens;
  bool wrote_text = false;
  while (reader->Read(&response)) {
    AddLensMessage(response, &lens);
    if (!response.text().empty()) {
      WriteOut(response.text());
      wrote_text = true;
    }
    last = std::move(response);
    response.Clear();
  }
  grpc::Status status = reader->Finish();
  // A completed reply ends with a newline; so does the partial text of a
  // failed one, so that the error goes to stderr on a line of its own.
  if (status.ok() || wrote_text) WriteOut("\n");
  RETURN_IF_ERROR(RpcError(status));
  RETURN_IF_ERROR(WriteLens(line, options, request, stub.get(), &lens));
  WriteVerbose(line.args(), context, last);
  return absl::OkStatus();
}

}  // namespace tributary
