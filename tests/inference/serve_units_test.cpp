// ds-serve's parts without a server: request validation (OpenAI's rules: unknown fields ignored,
// wrong types and bad ranges refused naming the field), the context checks of prepare_request, the
// OpenAI error body, streamed text that never splits a UTF-8 character, and the Prometheus text.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "serve/api_error.h"
#include "serve/metrics.h"
#include "serve/prepare.h"
#include "serve/request.h"
#include "serve/text_codec.h"

namespace ds::serve {
namespace {

ApiError refusal(const std::string& body, Endpoint ep = Endpoint::kCompletions) {
  try {
    parse_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ServeRequest, UnknownFieldsIgnoredKnownFieldsTyped) {
  auto r = parse_request(R"({"model":"m","prompt":"Hi","max_tokens":5,"temperature":0,"stop":"\n",
                            "some_future_field":{"x":1},"user":"u"})",
                         Endpoint::kCompletions);
  EXPECT_EQ(r.prompt, "Hi");
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.temperature, 0.0);
  ASSERT_EQ(r.stop.size(), 1u);
  auto c = parse_request(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],
                            "max_completion_tokens":3,"stream":true,"stream_options":{"include_usage":true}})",
                         Endpoint::kChat);
  ASSERT_EQ(c.messages.size(), 1u);
  EXPECT_EQ(c.messages[0].content, "ab");
  EXPECT_EQ(c.max_tokens, 3);
  EXPECT_TRUE(c.stream && c.include_usage);
}

TEST(ServeRequest, WrongTypesAndRangesNameTheField) {
  struct Case { const char* body; const char* param; };
  for (auto [body, param] : std::vector<Case>{
           {R"({"prompt":"Hi","temperature":"hot"})", "temperature"},
           {R"({"prompt":"Hi","max_tokens":"5"})", "max_tokens"},
           {R"({"prompt":"Hi","max_tokens":0})", "max_tokens"},
           {R"({"prompt":"Hi","max_tokens":2.5})", "max_tokens"},
           {R"({"prompt":"Hi","stream":"yes"})", "stream"},
           {R"({"prompt":"Hi","top_p":1.5})", "top_p"},
           {R"({"prompt":"Hi","stop":[1]})", "stop"},
           {R"({"prompt":"Hi","n":2})", "n"},
           {R"({"prompt":42})", "prompt"},
           {R"({"max_tokens":4})", "prompt"},
           {R"({"prompt":"Hi","model":7})", "model"},
       }) {
    const auto e = refusal(body);
    EXPECT_EQ(e.status, 400) << body;
    EXPECT_EQ(e.param, param) << body << ": " << e.what();
  }
  EXPECT_EQ(refusal(R"({"messages":[{"role":"user","content":5}]})", Endpoint::kChat).param, "messages[0].content");
  EXPECT_EQ(refusal(R"({"messages":"hi"})", Endpoint::kChat).param, "messages");
}

TEST(ServeRequest, MalformedJsonAndInvalidUtf8) {
  EXPECT_EQ(refusal(R"({"prompt": "Hi",)").code, "invalid_json");
  EXPECT_EQ(refusal("[1,2]").code, "invalid_json");
  EXPECT_EQ(refusal("{\"prompt\": \"\xff\xfe\"}").code, "invalid_encoding");
  EXPECT_EQ(refusal("{\"prompt\": \"\xe2\x82\"}").code, "invalid_encoding");  // cut character
  EXPECT_TRUE(is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac"));
}

TEST(ServeRequest, ErrorBodyIsOpenAIs) {
  const auto j = nlohmann::json::parse(error_body(bad_request("bad", "max_tokens")));
  EXPECT_EQ(j["error"]["message"], "bad");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_EQ(j["error"]["code"], "invalid_value");
  EXPECT_TRUE(nlohmann::json::parse(error_body(ApiError(503, "x", "server_error")))["error"]["param"].is_null());
}

TEST(ServePrepare, ContextLimitsAndDefaults) {
  const auto codec = TextCodec::bytes();
  const PromptLimits limits{.context = 64, .max_prompt_tokens = 0, .vocab_size = 256};
  auto req = [](const std::string& prompt, std::optional<int64_t> max_tokens) {
    GenerationRequest r;
    r.prompt = prompt;
    r.max_tokens = max_tokens;
    return r;
  };
  auto p = prepare_request(req("Hello", std::nullopt), codec, limits);
  EXPECT_EQ(p.prompt, (std::vector<int64_t>{'H', 'e', 'l', 'l', 'o'}));
  EXPECT_EQ(p.params.max_tokens, 16);  // OpenAI's completions default
  EXPECT_EQ(prepare_request(req(std::string(60, 'a'), std::nullopt), codec, limits).params.max_tokens, 4);
  EXPECT_EQ(prepare_request(req("Hello", 59), codec, limits).params.max_tokens, 59);
  try {
    prepare_request(req("Hello", 60), codec, limits);
    ADD_FAILURE() << "max_tokens past the context accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.param, "max_tokens");
    EXPECT_NE(std::string(e.what()).find("lower max_tokens to at most 59"), std::string::npos) << e.what();
  }
  try {
    prepare_request(req(std::string(64, 'a'), std::nullopt), codec, limits);
    ADD_FAILURE() << "prompt over the context accepted";
  } catch (const ApiError& e) {
    EXPECT_EQ(e.code, "context_length_exceeded");
  }
  GenerationRequest ids;
  ids.prompt_ids = std::vector<int64_t>{1, 300};
  EXPECT_THROW(prepare_request(ids, codec, limits), ApiError);
}

TEST(ServeText, StreamDecoderNeverSplitsACharacter) {
  const auto codec = TextCodec::bytes();
  StreamDecoder d(codec);
  std::string streamed;
  for (unsigned char b : std::string("h\xc3\xa9\xe2\x82\xac!")) {
    const std::string piece = d.push({b});
    EXPECT_TRUE(is_valid_utf8(piece));
    streamed += piece;
  }
  streamed += d.finish();
  EXPECT_EQ(streamed, "h\xc3\xa9\xe2\x82\xac!");
  StreamDecoder cut(codec);
  EXPECT_EQ(cut.push({'a', 0xe2, 0x82}), "");
  EXPECT_EQ(cut.finish(), "a\xef\xbf\xbd");  // a cut character at the end becomes U+FFFD
}

TEST(ServeMetrics, PrometheusText) {
  Metrics m;
  m.counter("c_total", "a counter");
  m.gauge("g", "a gauge");
  m.histogram("h_seconds", "a histogram", {0.1, 1});
  m.add("c_total", 2, "status=\"200\"");
  m.set("g", 3);
  m.observe("h_seconds", 0.05);
  m.observe("h_seconds", 0.5);
  m.observe("h_seconds", 5);
  const std::string t = m.render();
  EXPECT_NE(t.find("# TYPE c_total counter\nc_total{status=\"200\"} 2\n"), std::string::npos) << t;
  EXPECT_NE(t.find("# TYPE g gauge\ng 3\n"), std::string::npos) << t;
  EXPECT_NE(t.find("h_seconds_bucket{le=\"0.1\"} 1\nh_seconds_bucket{le=\"1\"} 2\n"
                   "h_seconds_bucket{le=\"+Inf\"} 3\nh_seconds_sum 5.55\nh_seconds_count 3\n"),
            std::string::npos)
      << t;
}

}  // namespace
}  // namespace ds::serve
