// The logit-lens table on hand-built readings: cells, row labels (the token
// that came next), missing readings, wrapping, and the gathering of readings
// from stream messages.
#include "client/lens_table.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

namespace tributary {
namespace {

void AddReading(int position, int layer, int32_t id, const std::string& text,
                double probability, LensData* data) {
  v1::LensReading* reading = &data->readings.emplace_back();
  reading->set_position(position);
  reading->set_layer(layer);
  v1::TopLogprob* top = reading->add_top();
  top->set_token_id(id);
  top->set_text(text);
  top->set_logprob(static_cast<float>(std::log(probability)));
}

// "ROMEO:\n" (ids 10, 11, 12), then " but the" generated (20, 21).
LensData Sample() {
  LensData data;
  data.prompt_tokens = 3;
  data.prompt_ids = {10, 11, 12};
  data.generated_ids = {20, 21};
  data.texts = {
      {10, "ROMEO"}, {11, ":"}, {12, "\n"}, {20, " but"}, {21, " the"}};
  AddReading(1, 0, 11, ":", 0.5, &data);
  AddReading(1, 7, 12, "\n", 0.97, &data);
  AddReading(2, 0, 5, "And", 0.004, &data);
  AddReading(2, 7, 20, " but", 0.42, &data);
  AddReading(3, 0, 20, " but", 0.1, &data);
  AddReading(3, 7, 21, " the", 1.0, &data);
  AddReading(4, 0, 22, "unpredictably", 0.25, &data);  // no reading at 7
  return data;
}

TEST(LensTableTest, RendersOneRowPerPositionOneColumnPerLayer) {
  EXPECT_EQ(RenderLensTable(Sample(), 120),
            "logit lens: top-1 token and probability after each layer (row: "
            "position, the token that came next)\n"
            "pos  next  layer 0          layer 7\n"
            "  1  \\n    :           50%  \\n          97%\n"
            "  2  ␣but  And         <1%  ␣but        42%\n"
            "  3  ␣the  ␣but        10%  ␣the       100%\n"
            "  4        unpredict…  25%  -\n");
}

TEST(LensTableTest, WrapsLayersThatDoNotFit) {
  LensData data = Sample();
  AddReading(1, 3, 11, ":", 0.3, &data);
  // 40 columns: the labels (10) and one 17-wide column per block.
  const std::string table = RenderLensTable(data, 40);
  EXPECT_NE(table.find("pos  next  layer 0\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\n\npos  next  layer 3\n"), std::string::npos) << table;
  EXPECT_NE(table.find("\n\npos  next  layer 7\n"), std::string::npos) << table;
  for (size_t start = 0, end; start < table.size(); start = end + 1) {
    end = table.find('\n', start);
    if (start == 0) continue;  // the title
    EXPECT_LE(end - start, 40u) << table.substr(start, end - start);
  }
}

TEST(LensTableTest, UnknownNextTokensAndEmpty) {
  LensData data;
  AddReading(0, 2, 9, "", 0.9, &data);  // no text: shown by id
  data.generated_ids = {9};
  // Without prompt_tokens the row has no next token.
  EXPECT_NE(RenderLensTable(data, 120).find("  0        #9    90%"),
            std::string::npos)
      << RenderLensTable(data, 120);
  data.prompt_tokens = 1;  // position 0 predicts generated token 9
  EXPECT_NE(RenderLensTable(data, 120).find("  0  #9    #9    90%"),
            std::string::npos)
      << RenderLensTable(data, 120);
  EXPECT_NE(RenderLensTable(LensData(), 120).find("(no readings)"),
            std::string::npos);
}

TEST(LensTableTest, CellTextAndPieces) {
  EXPECT_EQ(LensCellText(" but", 10), "␣but");
  EXPECT_EQ(LensCellText("a\nb\t\x01", 10), "a\\nb\\t\\x01");
  EXPECT_EQ(LensCellText("abcdefghij", 10), "abcdefghij");
  EXPECT_EQ(LensCellText("abcdefghijk", 10), "abcdefghi…");
  EXPECT_EQ(LensCellText("ééééééééééé", 10), "ééééééééé…");  // by character
  EXPECT_EQ(ByteLevelPieceText("\xC4\xA0world"), " world");  // Ġworld
  EXPECT_EQ(ByteLevelPieceText("\xC4\x8A"), "\n");           // Ċ
  EXPECT_EQ(ByteLevelPieceText("ROMEO"), "ROMEO");
  EXPECT_EQ(ByteLevelPieceText("\xE2\x96\x81x"), "\xE2\x96\x81x");  // ▁x
}

TEST(LensTableTest, GathersStreamMessages) {
  LensData data;
  v1::GenerateResponse first;
  first.set_text(" but");
  first.add_token_ids(20);
  v1::LensReading* reading = first.add_logit_lens();
  reading->set_position(2);
  reading->add_top()->set_token_id(7);
  reading->mutable_top(0)->set_text("x");
  AddLensMessage(first, &data);
  v1::GenerateResponse last;
  last.mutable_usage()->set_prompt_tokens(3);
  AddLensMessage(last, &data);
  EXPECT_EQ(data.readings.size(), 1u);
  EXPECT_EQ(data.generated_ids, (std::vector<int32_t>{20}));
  EXPECT_EQ(data.texts.at(20), " but");
  EXPECT_EQ(data.texts.at(7), "x");
  EXPECT_EQ(data.prompt_tokens, 3);
}

}  // namespace
}  // namespace tributary
