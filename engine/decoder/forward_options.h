// What one forward step of the decoder is asked to do (ForwardOptions) and
// what it returns (ForwardOutput): the contract between the engine and
// HybridDecoder::Forward, and between the decoder and its StepRunner.
#ifndef TRIBUTARY_ENGINE_DECODER_FORWARD_OPTIONS_H_
#define TRIBUTARY_ENGINE_DECODER_FORWARD_OPTIONS_H_

#include <cstdint>
#include <vector>

#include "engine/backend/token_choice.h"
#include "engine/decoder/stream_interventions.h"

namespace tributary {

struct ForwardOptions {
  // Compute the per-token residual statistics of every sublayer.
  bool residual_stats = true;
  // Logits for every new token (the dump); otherwise only for the last new
  // token of each sequence.
  bool logits_for_all_tokens = false;
  // Interventions on the residual stream (stream_interventions.h); null or
  // empty: none. Not owned; must live until Forward returns.
  const StepInterventions* interventions = nullptr;
  // Empty, or one flag per logit row (per sequence unless
  // logits_for_all_tokens): a set row gets only the token the backend
  // chooses for it (ForwardOutput::device_ids), not its logits: its argmax,
  // or the token its entry of token_choices draws. For greedy and device
  // sampling, and for rows nobody samples from: a device then copies back
  // 4 bytes instead of a vocabulary's row.
  std::vector<bool> device_choice{};
  // Empty (every device_choice row takes its argmax), or one entry per logit
  // row: how the backend chooses the token of a device_choice row, and
  // whether it also returns the row's raw logprobs (Backend::ChooseTokens;
  // ignored for the other rows).
  std::vector<TokenChoice> token_choices{};
  // The history entries that token_choices with penalties point into
  // (TokenChoice::history_begin, history_count), every id in the
  // vocabulary.
  std::vector<TokenHistoryEntry> token_history{};
};

struct ForwardOutput {
  // Step rows (token indexes in the batch) that have logits, in order.
  std::vector<int64_t> logit_rows;
  // [rows without device_choice, vocab_size], raw f32, in logit row order
  // (all logit rows when device_choice is empty).
  std::vector<float> logits;
  // With device_choice: [logit_rows.size()], every row's token chosen by
  // the backend (the argmax: the lowest index of the largest logit; or the
  // token_choices draw); -1 when the row holds a NaN or an infinity. Empty
  // otherwise.
  std::vector<int32_t> device_ids;
  // With token_choices of which a row asks for logprobs: [logit_rows.size()],
  // those rows' raw logprobs (other entries unspecified). Empty otherwise.
  std::vector<TokenLogprobs> device_logprobs;
  // [2 · num_layers, num_tokens, kResidualStatsColumns] (backend.h): layer l's
  // mixer is entry 2l, its ffn 2l + 1. Empty when switched off.
  std::vector<float> residual_stats;
  // ‖x‖ of the stream entering the final norm, [num_tokens]; empty when the
  // residual statistics are off.
  std::vector<float> final_stream_norm;
  // [StepInterventions::lens.size(), vocab_size] raw f32: one row of
  // logits per lens read, in its order.
  std::vector<float> lens_logits;
  // One [hidden] f32 row per StepInterventions::captures entry, in order.
  std::vector<std::vector<float>> captured;
};

}  // namespace tributary

#endif  // TRIBUTARY_ENGINE_DECODER_FORWARD_OPTIONS_H_
