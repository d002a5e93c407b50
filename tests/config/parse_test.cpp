// JSON-level behaviour: comments, duplicate keys, syntax errors with line/column, numbers such as
// 5e8, files, and the normalized JSON kept in Config::json_text.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>

#include "config/json_parse.h"
#include "config_test_util.h"

namespace ds {
namespace {

TEST(Parse, CommentsAreAllowed) {
  const Config c = test::load(R"(// DeepSpeed config
{
  "train_batch_size": 16, // the global batch
  /* ZeRO */ "zero_optimization": {"stage": 2}
})");
  EXPECT_EQ(c.train_batch_size, 16);
  EXPECT_EQ(c.zero_optimization.stage, 2);
}

TEST(Parse, DuplicateKeysAreAnErrorNamingThePath) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "train_batch_size": 16})"),
            "train_batch_size: duplicate key in one object of <string> (DeepSpeed rejects duplicate keys; keep one)");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1, "stage": 2}})",
                      "zero_optimization.stage: duplicate key");
  // The same key in different objects is fine.
  EXPECT_NO_THROW(test::load(R"({"train_batch_size": 8, "fp16": {"enabled": false}, "bf16": {"enabled": false}})"));
  // Paths through arrays name the element.
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "x": [{"a": 1}, {"a": 1, "a": 2}]})", "x[1].a: duplicate key");
}

TEST(Parse, MalformedJsonNamesLineAndColumn) {
  const std::string msg = test::load_error("{\n  \"train_batch_size\": 8,\n  \"fp16\": {\"enabled\": tru}\n}");
  EXPECT_NE(msg.find("<string>: invalid JSON at line 3, column"), std::string::npos) << msg;
  EXPECT_NE(msg.find("invalid literal"), std::string::npos) << msg;
  // A trailing comma is hjson (accepted); a missing one is still an error, at the next key.
  const std::string missing_comma = test::load_error("{\"train_batch_size\": 8\n\n  \"fp16\": {}}");
  EXPECT_NE(missing_comma.find("line 3, column 8"), std::string::npos) << missing_comma;  // end of "fp16"
  EXPECT_NE(test::load_error("").find("line 1, column 1"), std::string::npos);
}

TEST(Parse, TopLevelMustBeAnObject) {
  EXPECT_EQ(test::load_error("[1, 2]"), "<string>: a DeepSpeed config must be a JSON object, got [1,2]");
}

TEST(Parse, IntegralFloatsAreIntegers) {
  const Config c = test::load(R"({"train_batch_size": 8.0, "zero_optimization": {"stage": 2,
      "reduce_bucket_size": 5e8, "allgather_bucket_size": 2E8, "sub_group_size": 1e12}})");
  EXPECT_EQ(c.train_batch_size, 8);
  EXPECT_EQ(c.zero_optimization.reduce_bucket_size, 500000000);
  EXPECT_EQ(c.zero_optimization.allgather_bucket_size, 200000000);
  EXPECT_EQ(c.zero_optimization.sub_group_size, 1000000000000);
  EXPECT_EQ(test::value_of(c, "zero_optimization.reduce_bucket_size"), "500000000");
}

TEST(Parse, NonIntegralFloatForAnIntegerKeyIsAnError) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "zero_optimization": {"reduce_bucket_size": 5.5}})"),
            "zero_optimization.reduce_bucket_size: expected an integer >= 0, got 5.5");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "zero_optimization": {"stage": 1.5}})"),
            "zero_optimization.stage: expected an integer 0..3, got 1.5");
  EXPECT_CONFIG_ERROR(R"({"train_batch_size": 8, "aio": {"queue_depth": 1e30}})",
                      "aio.queue_depth: expected an integer >= 1, got 1e+30");
}

TEST(Parse, WrongTypes) {
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "fp16": {"enabled": "yes"}})"),
            "fp16.enabled: expected true or false, got \"yes\"");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "gradient_clipping": "1.0"})"),
            "gradient_clipping: expected a number >= 0.0, got \"1.0\"");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "fp16": [true]})"), "fp16: expected an object, got [true]");
  EXPECT_EQ(test::load_error(R"({"train_batch_size": 8, "tensorboard": {"job_name": 3}})"),
            "tensorboard.job_name: expected a string, got 3");
}

TEST(Parse, JsonTextIsNormalized) {
  const Config c = test::load("{ /* c */ \"train_batch_size\": 8, \"fp16\": {\"enabled\": false} }");
  EXPECT_EQ(c.json_text, R"({"fp16":{"enabled":false},"train_batch_size":8})");
  EXPECT_EQ(c.origin, "<string>");
}

TEST(Parse, ParsedJsonLoadsToo) {
  const Config c = load_config_json(nlohmann::json{{"train_micro_batch_size_per_gpu", 2}}, 3);
  EXPECT_EQ(c.train_batch_size, 6);
  EXPECT_EQ(c.origin, "<json>");
}

TEST(Files, MissingFileIsAConfigError) {
  try {
    load_config_file("/nonexistent/ds_config.json", 1);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "cannot read config file '/nonexistent/ds_config.json': No such file or directory");
  }
  EXPECT_THROW(load_config_file("/tmp", 1), ConfigError);
}

TEST(Files, FileLoadsAndErrorsNameTheFile) {
  const std::string path = testing::TempDir() + "ds_config_parse_test.json";
  {
    std::ofstream(path) << "{\n  \"train_batch_size\": 8,\n  \"steps_per_print\": 5\n}\n";
  }
  const Config c = load_config_file(path, 2);
  EXPECT_EQ(c.train_micro_batch_size_per_gpu, 4);
  EXPECT_EQ(c.steps_per_print, 5);
  EXPECT_EQ(c.origin, path);
  {
    std::ofstream(path) << "{\n  \"train_batch_size\": 8,\n]\n";
  }
  try {
    load_config_file(path, 1);
    FAIL() << "expected ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find(path + ": invalid JSON at line 3, column 1"), std::string::npos) << e.what();
  }
  std::remove(path.c_str());
}

}  // namespace
}  // namespace ds
