#include "client/lens_table.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace tributary {
namespace {

constexpr int kMaxTokenWidth = 10;
constexpr int kPercentWidth = 4;  // "100%"

bool IsContinuation(unsigned char byte) { return (byte & 0xC0) == 0x80; }

// Display width in code points (every character taken as one column).
int Width(const std::string& text) {
  int width = 0;
  for (char c : text) width += IsContinuation(c) ? 0 : 1;
  return width;
}

std::string PadRight(const std::string& text, int width) {
  return text + std::string(std::max(0, width - Width(text)), ' ');
}

std::string PadLeft(const std::string& text, int width) {
  return std::string(std::max(0, width - Width(text)), ' ') + text;
}

// The code points of `text`; false when it is not valid UTF-8.
bool DecodeUtf8(const std::string& text, std::vector<uint32_t>* out) {
  for (size_t i = 0; i < text.size();) {
    const unsigned char lead = text[i];
    const int length = lead < 0x80       ? 1
                       : lead >> 5 == 6  ? 2
                       : lead >> 4 == 14 ? 3
                       : lead >> 3 == 30 ? 4
                                         : 0;
    if (length == 0 || i + length > text.size()) return false;
    uint32_t cp = length == 1 ? lead : lead & (0x7F >> length);
    for (int k = 1; k < length; ++k) {
      const unsigned char byte = text[i + k];
      if (!IsContinuation(byte)) return false;
      cp = (cp << 6) | (byte & 0x3F);
    }
    out->push_back(cp);
    i += length;
  }
  return true;
}

std::string TokenLabel(const LensData& data, int32_t id) {
  auto it = data.texts.find(id);
  return it != data.texts.end() && !it->second.empty()
             ? LensCellText(it->second, kMaxTokenWidth)
             : absl::StrCat("#", id);
}

std::string Percent(float logprob) {
  const double percent = 100.0 * std::exp(static_cast<double>(logprob));
  if (!(percent >= 0.5)) return "<1%";
  return absl::StrFormat("%.0f%%", std::min(percent, 100.0));
}

// The token that followed `position`, when known ("" otherwise).
std::string NextToken(const LensData& data, int position) {
  const int prompt = data.prompt_tokens > 0
                         ? data.prompt_tokens
                         : static_cast<int>(data.prompt_ids.size());
  const int next = position + 1;
  if (prompt == 0 || next < 0) return "";
  if (next < prompt) {
    if (static_cast<int>(data.prompt_ids.size()) != prompt) return "";
    return TokenLabel(data, data.prompt_ids[next]);
  }
  const size_t index = static_cast<size_t>(next - prompt);
  if (index >= data.generated_ids.size()) return "";
  return TokenLabel(data, data.generated_ids[index]);
}

}  // namespace

void AddLensMessage(const v1::GenerateResponse& message, LensData* data) {
  for (const v1::LensReading& reading : message.logit_lens()) {
    data->readings.push_back(reading);
    for (const v1::TopLogprob& top : reading.top()) {
      if (!top.text().empty()) data->texts[top.token_id()] = top.text();
    }
  }
  if (message.token_ids_size() == 1 && !message.text().empty()) {
    data->texts.emplace(message.token_ids(0), message.text());
  }
  data->generated_ids.insert(data->generated_ids.end(),
                             message.token_ids().begin(),
                             message.token_ids().end());
  if (message.usage().prompt_tokens() > 0) {
    data->prompt_tokens = message.usage().prompt_tokens();
  }
}

std::string ByteLevelPieceText(const std::string& piece) {
  // GPT-2's byte ↔ character map: the printable bytes stand for themselves,
  // the other 68 map, in byte order, to U+0100 upward.
  auto printable = [](int b) {
    return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
  };
  std::vector<uint32_t> points;
  if (!DecodeUtf8(piece, &points)) return piece;
  std::string bytes;
  for (uint32_t cp : points) {
    if (cp < 256 && printable(static_cast<int>(cp))) {
      bytes += static_cast<char>(cp);
      continue;
    }
    if (cp < 256 || cp >= 256 + 68) return piece;
    uint32_t rank = cp - 256;
    for (int b = 0; b < 256; ++b) {
      if (printable(b)) continue;
      if (rank-- == 0) bytes += static_cast<char>(b);
    }
  }
  std::vector<uint32_t> check;
  return DecodeUtf8(bytes, &check) ? bytes : piece;
}

std::string LensCellText(const std::string& text, int max_width) {
  std::vector<std::string> chars;
  for (size_t i = 0; i < text.size(); ++i) {
    const unsigned char c = text[i];
    if (IsContinuation(c) && !chars.empty()) {
      chars.back() += static_cast<char>(c);
    } else if (c == ' ') {
      chars.push_back("\xE2\x90\xA3");  // ␣
    } else if (c == '\n' || c == '\t' || c == '\r') {
      chars.push_back(c == '\n' ? "\\n" : c == '\t' ? "\\t" : "\\r");
    } else if (c < 0x20 || c == 0x7F) {
      chars.push_back(absl::StrFormat("\\x%02x", c));
    } else {
      chars.push_back(std::string(1, static_cast<char>(c)));
    }
  }
  int total = 0;
  for (const std::string& c : chars) total += Width(c);
  std::string out;
  if (total <= max_width) {
    for (const std::string& c : chars) out += c;
    return out;
  }
  int width = 0;
  for (const std::string& c : chars) {
    if (width + Width(c) > max_width - 1) break;
    out += c;
    width += Width(c);
  }
  return out + "\xE2\x80\xA6";  // …
}

std::string RenderLensTable(const LensData& data, int width) {
  std::string out =
      "logit lens: top-1 token and probability after each layer (row: "
      "position, the token that came next)\n";
  if (data.readings.empty()) return out + "(no readings)\n";
  std::map<int, std::map<int, std::string>> cells;  // position → layer → cell
  std::set<int> layers;
  int text_width = 4, next_width = 4, position_width = 3;
  for (const v1::LensReading& reading : data.readings) {
    layers.insert(reading.layer());
    std::string text = "?", percent;
    if (reading.top_size() > 0) {
      const v1::TopLogprob& top = reading.top(0);
      text = top.text().empty() ? absl::StrCat("#", top.token_id())
                                : LensCellText(top.text(), kMaxTokenWidth);
      percent = Percent(top.logprob());
    }
    text_width = std::max(text_width, Width(text));
    cells[reading.position()][reading.layer()] =
        absl::StrCat(text, "\t", percent);
  }
  std::map<int, std::string> next;
  for (const auto& [position, row] : cells) {
    next[position] = NextToken(data, position);
    next_width = std::max(next_width, Width(next[position]));
    position_width = std::max(position_width,
                              static_cast<int>(absl::StrCat(position).size()));
  }
  const int cell_width = text_width + 1 + kPercentWidth;
  const int label_width = position_width + 2 + next_width;
  const int per_block = std::max(1, (width - label_width) / (cell_width + 2));
  const std::vector<int> all(layers.begin(), layers.end());
  for (size_t start = 0; start < all.size(); start += per_block) {
    const size_t end = std::min(all.size(), start + per_block);
    std::string header = absl::StrCat(PadLeft("pos", position_width), "  ",
                                      PadRight("next", next_width));
    for (size_t i = start; i < end; ++i) {
      absl::StrAppend(&header, "  ",
                      PadRight(absl::StrCat("layer ", all[i]), cell_width));
    }
    absl::StrAppend(&out, start == 0 ? "" : "\n",
                    header.substr(0, header.find_last_not_of(' ') + 1), "\n");
    for (const auto& [position, row] : cells) {
      std::string line =
          absl::StrCat(PadLeft(absl::StrCat(position), position_width), "  ",
                       PadRight(next[position], next_width));
      for (size_t i = start; i < end; ++i) {
        auto it = row.find(all[i]);
        std::string cell = "-";
        if (it != row.end()) {
          const size_t tab = it->second.find('\t');
          cell =
              absl::StrCat(PadRight(it->second.substr(0, tab), text_width), " ",
                           PadLeft(it->second.substr(tab + 1), kPercentWidth));
        }
        absl::StrAppend(&line, "  ", PadRight(cell, cell_width));
      }
      absl::StrAppend(&out, line.substr(0, line.find_last_not_of(' ') + 1),
                      "\n");
    }
  }
  return out;
}

}  // namespace tributary
