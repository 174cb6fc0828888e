// The intervention flags of generate/chat: --steer SPEC parsing, DIRECTION
// (a name or @FILE), layer lists, and the request each flag builds. No
// network.
#include "client/intervention_flags.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <vector>

#include "client/channel_options.h"
#include "client/generate_flags.h"

namespace tributary {
namespace {

absl::StatusOr<v1::GenerateRequest> Build(std::vector<const char*> args) {
  args.insert(args.begin(), "tributary");
  auto line = CommandLine::Parse(static_cast<int>(args.size()), args.data(),
                                 ChannelFlagNames(), {},
                                 {GenerateCommandSpec(), ChatCommandSpec()});
  if (!line.ok()) return line.status();
  return BuildGenerateRequest(*line);
}

std::string BuildError(std::vector<const char*> args) {
  auto request = Build(std::move(args));
  return request.ok() ? "" : std::string(request.status().message());
}

std::string SteerError(const std::string& spec) {
  auto steering = ParseSteerSpec(spec);
  return steering.ok() ? "" : std::string(steering.status().message());
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path) << contents;
  return path;
}

TEST(SteerSpecTest, Valid) {
  auto plain = ParseSteerSpec("3:romeo");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->layer(), 3);
  EXPECT_EQ(plain->direction().name(), "romeo");
  EXPECT_FALSE(plain->has_scale());  // the server's 1
  EXPECT_EQ(plain->point(), v1::STREAM_POINT_AFTER_FFN);
  EXPECT_EQ(plain->tokens(), v1::TOKEN_SCOPE_ALL);

  auto scaled = ParseSteerSpec("3:romeo:2");
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  EXPECT_FLOAT_EQ(scaled->scale(), 2.0f);

  const std::string path = WriteTemp("steer_v.txt", "0.5, -1\n2e-1\t3,");
  auto full = ParseSteerSpec("5:@" + path + ":-1.5:mixer:generated");
  ASSERT_TRUE(full.ok()) << full.status();
  EXPECT_EQ(full->layer(), 5);
  ASSERT_TRUE(full->direction().has_inline_vector());
  EXPECT_EQ(
      std::vector<float>(full->direction().inline_vector().values().begin(),
                         full->direction().inline_vector().values().end()),
      (std::vector<float>{0.5f, -1.0f, 0.2f, 3.0f}));
  EXPECT_FLOAT_EQ(full->scale(), -1.5f);
  EXPECT_EQ(full->point(), v1::STREAM_POINT_AFTER_MIXER);
  EXPECT_EQ(full->tokens(), v1::TOKEN_SCOPE_GENERATED);

  // The optional parts in any order; the defaults may be spelled out.
  auto reordered = ParseSteerSpec("0:x:generated:ffn:0");
  ASSERT_TRUE(reordered.ok()) << reordered.status();
  EXPECT_EQ(reordered->point(), v1::STREAM_POINT_AFTER_FFN);
  EXPECT_TRUE(reordered->has_scale());
  EXPECT_EQ(reordered->scale(), 0.0f);
}

TEST(SteerSpecTest, InvalidNamesTheFlagAndThePart) {
  EXPECT_EQ(SteerError("3"),
            "flag --steer '3': needs LAYER:DIRECTION (expected "
            "LAYER:DIRECTION[:SCALE][:mixer][:generated])");
  EXPECT_NE(SteerError("x:romeo").find("LAYER 'x' is not a layer index"),
            std::string::npos);
  EXPECT_NE(SteerError("-1:romeo").find("LAYER '-1'"), std::string::npos);
  EXPECT_NE(SteerError("3:").find("empty DIRECTION"), std::string::npos);
  EXPECT_NE(SteerError("3:romeo:loud").find("'loud' is not a SCALE"),
            std::string::npos);
  EXPECT_NE(SteerError("3:romeo:1:2").find("SCALE given twice"),
            std::string::npos);
  EXPECT_NE(SteerError("3:romeo:inf").find("not finite"), std::string::npos);
  EXPECT_NE(SteerError("3:romeo:mixer:ffn").find("stream point given twice"),
            std::string::npos);
  EXPECT_NE(SteerError("3:romeo:generated:generated").find("token scope"),
            std::string::npos);
  EXPECT_NE(SteerError("3:@").find("'@' needs a file name"), std::string::npos);
  const std::string missing = SteerError("3:@/no/such/vector.txt");
  EXPECT_NE(missing.find("flag --steer: cannot read vector file "
                         "'/no/such/vector.txt'"),
            std::string::npos)
      << missing;
  const std::string bad = WriteTemp("steer_bad.txt", "1 2 x3");
  EXPECT_NE(SteerError("3:@" + bad).find("'x3' in '" + bad + "' (value 3)"),
            std::string::npos);
  const std::string empty = WriteTemp("steer_empty.txt", " \n, ");
  EXPECT_NE(SteerError("3:@" + empty).find("holds no numbers"),
            std::string::npos);
  // Every error is one line.
  EXPECT_EQ(SteerError("3:romeo:loud").find('\n'), std::string::npos);
}

TEST(InterventionRequestTest, EachFlag) {
  const std::string path = WriteTemp("ablate_v.txt", "1 0 0");
  auto request = Build({"generate", "x", "--steer", "3:romeo:2", "--steer",
                        "1:calm:mixer", "--ablate", "gender", "--ablate",
                        ("@" + path).c_str(), "--skip-layers", "1, 2"});
  ASSERT_TRUE(request.ok()) << request.status();
  ASSERT_EQ(request->steering_size(), 2);
  EXPECT_EQ(request->steering(0).layer(), 3);
  EXPECT_EQ(request->steering(0).direction().name(), "romeo");
  EXPECT_FLOAT_EQ(request->steering(0).scale(), 2.0f);
  EXPECT_EQ(request->steering(1).point(), v1::STREAM_POINT_AFTER_MIXER);
  ASSERT_EQ(request->ablate_size(), 2);
  EXPECT_EQ(request->ablate(0).name(), "gender");
  EXPECT_EQ(request->ablate(1).inline_vector().values_size(), 3);
  EXPECT_EQ(std::vector<int32_t>(request->skip_layers().begin(),
                                 request->skip_layers().end()),
            (std::vector<int32_t>{1, 2}));
  EXPECT_FALSE(request->has_logit_lens());
  EXPECT_FALSE(request->response().return_token_ids());

  auto lens = Build({"chat", "hi", "--lens", "3,5,7", "--lens-top", "2",
                     "--lens-prompt", "--lens-width", "80"});
  ASSERT_TRUE(lens.ok()) << lens.status();
  ASSERT_TRUE(lens->has_logit_lens());
  EXPECT_EQ(std::vector<int32_t>(lens->logit_lens().layers().begin(),
                                 lens->logit_lens().layers().end()),
            (std::vector<int32_t>{3, 5, 7}));
  EXPECT_EQ(lens->logit_lens().top_n(), 2);
  EXPECT_TRUE(lens->logit_lens().include_prompt());
  EXPECT_TRUE(lens->response().return_token_ids());

  auto all = Build({"generate", "x", "--lens", "all"});
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_TRUE(all->has_logit_lens());
  EXPECT_EQ(all->logit_lens().layers_size(), 0);  // every layer
  EXPECT_EQ(all->logit_lens().top_n(), 0);        // the server's 5
  EXPECT_FALSE(all->logit_lens().include_prompt());

  auto none = Build({"generate", "x"});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(
      none->steering_size() + none->ablate_size() + none->skip_layers_size(),
      0);
}

TEST(InterventionRequestTest, ErrorsNameTheFlag) {
  EXPECT_NE(BuildError({"generate", "x", "--steer", "a:b"}).find("--steer"),
            std::string::npos);
  EXPECT_NE(BuildError({"generate", "x", "--ablate", ""}).find("--ablate"),
            std::string::npos);
  EXPECT_NE(BuildError({"generate", "x", "--skip-layers", "1,a"})
                .find("--skip-layers"),
            std::string::npos);
  EXPECT_NE(BuildError({"generate", "x", "--lens", "every"}).find("--lens"),
            std::string::npos);
  EXPECT_NE(BuildError({"generate", "x", "--lens", "all", "--lens-top", "0"})
                .find("--lens-top"),
            std::string::npos);
  EXPECT_NE(BuildError({"generate", "x", "--lens", "all", "--lens-width", "10"})
                .find("--lens-width"),
            std::string::npos);
  EXPECT_EQ(BuildError({"generate", "x", "--lens-top", "3"}),
            "flag --lens-top needs --lens");
  EXPECT_EQ(BuildError({"generate", "x", "--lens-prompt"}),
            "flag --lens-prompt needs --lens");
  EXPECT_EQ(BuildError({"generate", "x", "--steer"}),
            "flag --steer needs a value");
}

}  // namespace
}  // namespace tributary
