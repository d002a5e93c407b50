// ds-serve's parts without a server: request validation (OpenAI's rules: unknown fields ignored,
// wrong types and bad ranges refused naming the field), the context checks of prepare_request, the
// OpenAI error body, a choice's text cut at a stop string across tokens, logprob entries following
// the text, best_of's ranking, and the Prometheus text. (StopMatcher and StreamDecoder themselves:
// text_generation_test.cpp.)
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "data/text_codec.h"
#include "inference_test_util.h"
#include "serve/api_error.h"
#include "serve/best_of.h"
#include "serve/choice_stream.h"
#include "serve/metrics.h"
#include "serve/prepare.h"
#include "serve/request.h"
#include "serve/responses.h"
#include "serve/serving_loop.h"

namespace ds::serve {
namespace {

using data::TextCodec;

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
           {R"({"prompt":"Hi","n":0})", "n"},
           {R"({"prompt":"Hi","n":129})", "n"},
           {R"({"prompt":"Hi","n":"2"})", "n"},
           {R"({"prompt":"Hi","logprobs":6})", "logprobs"},
           {R"({"prompt":"Hi","logprobs":-1})", "logprobs"},
           {R"({"prompt":"Hi","logprobs":true})", "logprobs"},
           {R"({"prompt":"Hi","presence_penalty":2.5})", "presence_penalty"},
           {R"({"prompt":"Hi","frequency_penalty":-3})", "frequency_penalty"},
           {R"({"prompt":"Hi","frequency_penalty":"high"})", "frequency_penalty"},
           {R"({"prompt":"Hi","echo":1})", "echo"},
           {R"({"prompt":"Hi","echo":true,"logprobs":1})", "echo"},
           {R"({"prompt":"Hi","stop":["a","b","c","d","e"]})", "stop"},
           {R"({"prompt":"Hi","stop":""})", "stop"},
           {R"({"prompt":"Hi","stop":{"x":1}})", "stop"},
           {R"({"prompt":"Hi","n":3,"best_of":2})", "best_of"},
           {R"({"prompt":"Hi","best_of":21})", "best_of"},
           {R"({"prompt":"Hi","best_of":0})", "best_of"},
           {R"({"prompt":"Hi","best_of":"2"})", "best_of"},
           {R"({"prompt":"Hi","best_of":2,"stream":true})", "best_of"},
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
  const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}],)";
  EXPECT_EQ(refusal(chat + R"("logprobs":3})", Endpoint::kChat).param, "logprobs");  // chat's is a boolean
  EXPECT_EQ(refusal(chat + R"("logprobs":true,"top_logprobs":21})", Endpoint::kChat).param, "top_logprobs");
  EXPECT_EQ(refusal(chat + R"("top_logprobs":2})", Endpoint::kChat).param, "top_logprobs");  // needs logprobs
  EXPECT_EQ(refusal(chat + R"("n":0})", Endpoint::kChat).param, "n");
}

TEST(ServeRequest, ChoicesLogprobsPenaltiesEchoStopAccepted) {
  auto r = parse_request(R"({"prompt":"Hi","n":3,"logprobs":0,"presence_penalty":-1.5,"frequency_penalty":2,
                            "stop":["x","yz"]})",
                         Endpoint::kCompletions);
  EXPECT_EQ(r.n, 3);
  EXPECT_EQ(r.logprobs, 0);
  EXPECT_EQ(r.presence_penalty, -1.5);
  EXPECT_EQ(r.frequency_penalty, 2.0);
  EXPECT_EQ(r.stop, (std::vector<std::string>{"x", "yz"}));
  EXPECT_TRUE(parse_request(R"({"prompt":"Hi","echo":true,"logprobs":null})", Endpoint::kCompletions).echo);
  EXPECT_FALSE(parse_request(R"({"prompt":"Hi"})", Endpoint::kCompletions).logprobs.has_value());
  const std::string chat = R"({"messages":[{"role":"user","content":"Hi"}],)";
  EXPECT_EQ(parse_request(chat + R"("logprobs":true,"top_logprobs":20})", Endpoint::kChat).logprobs, 20);
  EXPECT_EQ(parse_request(chat + R"("logprobs":true})", Endpoint::kChat).logprobs, 0);
  EXPECT_FALSE(parse_request(chat + R"("logprobs":false})", Endpoint::kChat).logprobs.has_value());
  // The parameters reach the engine; with a seed, choice i draws from seed + i.
  GenerationRequest g = r;
  g.seed = 7;
  const auto p = prepare_request(g, TextCodec::bytes(), {.context = 64, .max_prompt_tokens = 0, .vocab_size = 256});
  EXPECT_EQ(p.params.presence_penalty, -1.5);
  EXPECT_EQ(p.params.frequency_penalty, 2.0);
  EXPECT_EQ(p.params.logprobs, 0);
  EXPECT_TRUE(p.params.stop_sequences.empty()) << "stop strings are matched on text, not as token sequences";
  const auto choices = choice_params(p.params, 3);
  ASSERT_EQ(choices.size(), 3u);
  EXPECT_EQ(choices[0].seed, 7u);
  EXPECT_EQ(choices[2].seed, 9u);
  EXPECT_FALSE(choice_params(inference::SamplingParams{}, 2)[1].seed.has_value());
}

TEST(ServeRequest, BestOfIsTheCandidateCount) {
  EXPECT_EQ(parse_request(R"({"prompt":"Hi","best_of":3})", Endpoint::kCompletions).best_of, 3);
  EXPECT_EQ(parse_request(R"({"prompt":"Hi","n":2,"best_of":20})", Endpoint::kCompletions).best_of, 20);
  EXPECT_EQ(parse_request(R"({"prompt":"Hi","n":4})", Endpoint::kCompletions).best_of, 4) << "unset: n candidates";
  // Equal to n it chooses nothing, so it streams.
  EXPECT_EQ(parse_request(R"({"prompt":"Hi","n":2,"best_of":2,"stream":true})", Endpoint::kCompletions).best_of, 2);
  const auto e = refusal(R"({"prompt":"Hi","n":3,"best_of":2})");
  EXPECT_NE(std::string(e.what()).find("[n, 20]"), std::string::npos) << e.what();
}

TEST(ServeBestOf, HighestMeanTokenLogprobFirst) {
  auto lps = [](std::vector<double> v) {
    std::vector<inference::TokenLogprob> out;
    for (double x : v) out.push_back({1, x, {}});
    return out;
  };
  std::vector<CandidateScore> s(5);
  s[0].add(lps({-1.0, -3.0}), 2);        // mean -2
  s[1].add(lps({-0.5, -0.5, -9.0}), 2);  // the token past a stop string does not count: mean -0.5
  s[2].add(lps({-4.0}), 1);              // sum -4 but a long sequence is not penalised for its length:
  s[3].add(lps({-0.2, -0.2}), 2);        //   mean -0.2 beats sum -0.4 of two tokens
  s[3].add(lps({-0.2, -0.2}), 2);        // added step by step: mean still -0.2
  EXPECT_EQ(s[1].tokens, 2);
  EXPECT_DOUBLE_EQ(s[3].logprob_sum, -0.8);
  EXPECT_EQ(best_candidates(s, 2), (std::vector<size_t>{3, 1}));
  EXPECT_EQ(best_candidates(s, 5), (std::vector<size_t>{3, 1, 0, 2, 4})) << "a candidate without tokens ranks last";
  s[0] = s[1];  // ties keep the earlier candidate
  EXPECT_EQ(best_candidates(s, 3), (std::vector<size_t>{3, 0, 1}));
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

// Bytes as tokens: one token per byte, so every stop string spans tokens.
std::vector<int64_t> bytes_of(const std::string& s) {
  std::vector<int64_t> ids;
  for (unsigned char c : s) ids.push_back(c);
  return ids;
}

TEST(ServeStop, ChoiceStreamCutsTheTextAndTheTokens) {
  const auto codec = TextCodec::bytes();
  ChoiceStream c(codec, {"lo w"});
  std::string streamed;
  for (const std::string piece : {"hel", "lo", " wor", "ld"}) streamed += c.push(bytes_of(piece), {}).text;
  EXPECT_TRUE(c.stopped());
  EXPECT_EQ(streamed, "hel");
  EXPECT_EQ(c.num_tokens(), 7) << "tokens through the one completing the stop string ('w')";
  EXPECT_EQ(c.finish().text, "");
  // Held back while the stop string is undecided: nothing after "hel" went out before " w" arrived.
  ChoiceStream d(codec, {"lo w"});
  EXPECT_EQ(d.push(bytes_of("hello"), {}).text, "hel");
  EXPECT_EQ(d.push(bytes_of(" "), {}).text, "");
  EXPECT_EQ(d.push(bytes_of("x"), {}).text, "lo x");
  EXPECT_EQ(d.finish().text, "");
  EXPECT_FALSE(d.stopped());
  EXPECT_EQ(d.num_tokens(), 7);
  // Echo: the prompt opens the text.
  ChoiceStream e(codec, {}, "Q: ");
  EXPECT_EQ(e.push(bytes_of("A"), {}).text, "Q: A");
  EXPECT_EQ(e.finish().text, "");
}

TEST(ServeStop, ChoiceStreamLogprobsFollowTheText) {
  const auto codec = TextCodec::bytes();
  auto lps = [](const std::string& s) {
    std::vector<inference::TokenLogprob> v;
    for (unsigned char ch : s) v.push_back({ch, -0.5, {{ch, -0.5}, {'?', -1.5}}});
    return v;
  };
  // "h" "é" (2 bytes) "!" "<" "s" with stop "<s": entries for h, 0xc3, 0xa9, !.
  ChoiceStream c(codec, {"<s"}, "P");
  std::vector<LogprobEntry> got;
  for (const std::string piece : {"h\xc3", "\xa9!", "<", "s"}) {
    auto d = c.push(bytes_of(piece), lps(piece));
    got.insert(got.end(), d.logprobs.begin(), d.logprobs.end());
  }
  auto rest = c.finish();
  got.insert(got.end(), rest.logprobs.begin(), rest.logprobs.end());
  ASSERT_EQ(got.size(), 4u);
  EXPECT_EQ(got[0].token, "h");
  EXPECT_EQ(got[1].token, "\xc3");
  EXPECT_EQ(got[3].token, "!");
  EXPECT_EQ(got[0].text_offset, 1);  // after the echoed "P"
  EXPECT_EQ(got[1].text_offset, 2);
  EXPECT_EQ(got[2].text_offset, 2) << "the second byte of é starts no new character";
  EXPECT_EQ(got[3].text_offset, 3);
  ASSERT_EQ(got[0].top.size(), 2u);
  EXPECT_EQ(got[0].top[1].first, "?");
  // The JSON of both endpoints.
  const auto comp = logprobs_json(Endpoint::kCompletions, got);
  EXPECT_EQ(comp["tokens"][0], "h");
  EXPECT_EQ(comp["tokens"][1], "bytes:\\xc3") << "a lone byte of a character is shown as OpenAI does";
  EXPECT_EQ(token_text("\xe2\x82"), "bytes:\\xe2\\x82");
  EXPECT_EQ(token_text("\xc3\xa9"), "\xc3\xa9");
  EXPECT_EQ(comp["token_logprobs"][3], -0.5);
  EXPECT_EQ(comp["top_logprobs"][0]["?"], -1.5);
  EXPECT_EQ(comp["text_offset"], nlohmann::json::array({1, 2, 2, 3}));
  const auto chat = logprobs_json(Endpoint::kChat, got);
  EXPECT_EQ(chat["content"][1]["bytes"], nlohmann::json::array({0xc3}));
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["token"], "?");
  EXPECT_EQ(chat["content"][0]["top_logprobs"][1]["logprob"], -1.5);
  EXPECT_EQ(chat["content"].size(), 4u);
}

// OpenAI's n through the engine thread: one sequence per choice, events tagged by index; one choice
// cancelled (as a matched stop string does) ends at once while the other runs to max_tokens.
TEST(ServeLoop, ChoicesAreSequencesAndOneCanBeCancelledAlone) {
  inference::EngineOptions o;
  o.num_kv_blocks = 64;
  o.kv_block_size = 4;
  Metrics m;
  declare_serve_metrics(m);
  // 5 ms a step: 30 tokens take 150 ms, time enough to cancel choice 0 after its first token.
  ServingLoop loop(std::make_unique<inference::InferenceEngine>(inference::testing::tiny_gpt2(1), o), m,
                   {std::chrono::milliseconds(5)});
  inference::SamplingParams p;
  p.temperature = 0;
  p.max_tokens = 30;
  p.ignore_eos = true;
  const auto now = Clock::now();
  auto h = loop.submit({1, 2, 3}, choice_params(p, 2), now, now + std::chrono::seconds(60));
  std::vector<std::vector<int64_t>> tokens(2);
  std::vector<inference::FinishReason> finish(2, inference::FinishReason::kNone);
  bool accepted = false;
  int finished = 0;
  while (finished < 2) {
    auto e = h->next(std::chrono::seconds(10));
    ASSERT_TRUE(e.has_value()) << "no event for 10 s";
    ASSERT_TRUE(e->error.empty()) << e->error;
    if (e->accepted) {
      accepted = true;
      continue;
    }
    ASSERT_TRUE(e->index == 0 || e->index == 1) << e->index;
    auto& t = tokens[static_cast<size_t>(e->index)];
    t.insert(t.end(), e->tokens.begin(), e->tokens.end());
    if (e->index == 0 && !t.empty()) h->cancel_choice(0);
    if (e->finished) {
      finish[static_cast<size_t>(e->index)] = e->finish;
      ++finished;
    }
  }
  EXPECT_TRUE(accepted);
  EXPECT_EQ(finish[1], inference::FinishReason::kLength);
  EXPECT_EQ(tokens[1].size(), 30u);
  EXPECT_EQ(finish[0], inference::FinishReason::kAborted);
  EXPECT_LT(tokens[0].size(), 30u) << "the cancelled choice ran to max_tokens";
  EXPECT_TRUE(std::equal(tokens[0].begin(), tokens[0].end(), tokens[1].begin())) << "greedy choices differ";
  // A request the engine refuses gets the engine's reason as its first event.
  p.frequency_penalty = 3;
  auto refused = loop.submit({1, 2, 3}, choice_params(p, 2), now, now + std::chrono::seconds(60));
  auto e = refused->next(std::chrono::seconds(10));
  ASSERT_TRUE(e.has_value());
  EXPECT_NE(e->error.find("frequency_penalty"), std::string::npos) << e->error;
  loop.stop();
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
