// The logit-lens table of `tributary generate --lens`: one row per position
// (with the token that came next, when known), one column per layer, each
// cell the top-1 token of the reading and its probability. Readings arrive
// spread over the messages of a stream; LensData gathers them, and the
// rendering is a pure function of it (tested on hand-built readings).
#ifndef TRIBUTARY_CLIENT_LENS_TABLE_H_
#define TRIBUTARY_CLIENT_LENS_TABLE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "tributary/v1/tributary.pb.h"

namespace tributary {

struct LensData {
  std::vector<v1::LensReading> readings;
  // usage.prompt_tokens of the last message; 0 when unknown.
  int prompt_tokens = 0;
  // The prompt's ids when known (--ids, or a Tokenize call), else empty.
  std::vector<int32_t> prompt_ids;
  // The generated ids, in order (return_token_ids).
  std::vector<int32_t> generated_ids;
  // Token id → its text, from the readings' tops, the prompt's pieces and
  // messages that carry exactly one token.
  std::map<int32_t, std::string> texts;
};

// Gathers the readings, generated ids, texts and usage of one message.
void AddLensMessage(const v1::GenerateResponse& message, LensData* data);

// The text of a byte-level BPE piece as Tokenize spells it ("Ġworld" →
// " world", "Ċ" → "\n"); the piece unchanged when it is not one.
std::string ByteLevelPieceText(const std::string& piece);

// A token's text for a table cell: a space shown as "␣", newline, tab and
// carriage return as \n \t \r, other control bytes as \xNN; at most
// `max_width` characters (a cut one ends with "…").
std::string LensCellText(const std::string& text, int max_width);

// The table: a title line, then blocks of layer columns that fit in `width`
// characters (every layer is printed; more layers than fit wrap into further
// blocks, each repeating the row labels), one row per position in order.
// A cell is "TEXT PCT%" (top-1 text and 100·exp(logprob), "<1%" below 0.5);
// "-" where a layer has no reading at that position. Ends with a newline.
std::string RenderLensTable(const LensData& data, int width);

}  // namespace tributary

#endif  // TRIBUTARY_CLIENT_LENS_TABLE_H_
