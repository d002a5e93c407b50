// ds-serve end to end: the real binary on 127.0.0.1, driven by the official `openai` npm client
// (fixture serve_npm_setup) and by curl. ServeHttp: one server for the API, SSE framing, bad
// inputs, greedy output equal to Pipeline's, and a load burst with dropped streams.
// ServeLimits: a slowed server (--step-delay-ms) for 429, a client gone mid-stream, the request
// timeout (503) and SIGTERM with a request in flight.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <regex>
#include <set>

#include "data/text_codec.h"
#include "inference/pipeline.h"
#include "inference_test_util.h"
#include "serve_process.h"

namespace ds::serve::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using namespace std::chrono_literals;

const fs::path kWork = fs::path(DS_BINARY_DIR) / "tests/inference/serve";
const fs::path kNpm = fs::path(DS_BINARY_DIR) / "tests/inference/npm";

// A tiny random GPT-2 (bytes as tokens, 128 positions) saved as a Hugging Face folder.
std::string make_model_dir() {
  const fs::path dir = kWork / "tiny-gpt2";
  fs::create_directories(dir);
  torch::manual_seed(3);
  models::GPT2Config c{.vocab_size = 256, .n_positions = 128, .n_embd = 32, .n_layer = 2, .n_head = 2};
  auto m = std::make_shared<models::GPT2Impl>(c);
  inference::testing::widen_weights(*m, 0.4);
  models::save_pretrained(*m, dir.string());
  return dir.string();
}

struct Http {
  int status = 0;
  std::string body, headers;
  json error() const {
    const json j = json::parse(body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"] : json();
  }
};

// curl with the body from a file (any bytes), the answer's status, headers and body.
Http curl(const std::string& url, const std::string& body = "", const std::string& extra = "") {
  static std::atomic<int> n{0};
  const std::string tag = kWork.string() + "/curl" + std::to_string(getpid()) + "_" + std::to_string(n++);
  std::string cmd = "curl -sS -N -o " + tag + ".out -D " + tag + ".hdr -w '%{http_code}' " + extra + " ";
  if (!body.empty() || extra.find("-X POST") != std::string::npos) {
    std::ofstream(tag + ".in", std::ios::binary) << body;
    cmd += "-H 'Content-Type: application/json' --data-binary @" + tag + ".in ";
  }
  const auto r = run_command(cmd + "'" + url + "' 2>/dev/null");
  Http h;
  h.status = std::atoi(r.out.c_str());
  std::ifstream out(tag + ".out", std::ios::binary), hdr(tag + ".hdr");
  h.body.assign(std::istreambuf_iterator<char>(out), {});
  h.headers.assign(std::istreambuf_iterator<char>(hdr), {});
  fs::remove(tag + ".in");
  fs::remove(tag + ".out");
  fs::remove(tag + ".hdr");
  return h;
}

double metric(const ServeProcess& s, const std::string& line_start) {
  const std::string text = curl(s.url("/metrics")).body;
  const auto at = text.find("\n" + line_start + " ");
  return at == std::string::npos ? -1.0 : std::atof(text.c_str() + at + line_start.size() + 2);
}

// Waits until the metric reads `want`; false after `limit`.
bool wait_metric(const ServeProcess& s, const std::string& name, double want, std::chrono::milliseconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    if (metric(s, name) == want) return true;
    std::this_thread::sleep_for(20ms);
  }
  return false;
}

// The text of a streamed answer: every event `data: <json>\n\n`, the last `data: [DONE]\n\n`.
struct Sse {
  std::vector<json> chunks;
  bool done = false;
  std::string text, finish;
};
Sse parse_sse(const std::string& body) {
  Sse s;
  size_t pos = 0;
  while (pos < body.size()) {
    const auto end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "event not ended by a blank line: " << body.substr(pos);
    if (end == std::string::npos) break;
    const std::string ev = body.substr(pos, end - pos);
    pos = end + 2;
    EXPECT_EQ(ev.rfind("data: ", 0), 0u) << ev;
    EXPECT_FALSE(s.done) << "event after [DONE]: " << ev;
    if (ev == "data: [DONE]") {
      s.done = true;
      continue;
    }
    s.chunks.push_back(json::parse(ev.substr(6)));
    const json& c = s.chunks.back();
    if (c.contains("choices") && !c["choices"].empty()) {
      const json& ch = c["choices"][0];
      if (ch.contains("text")) s.text += ch["text"].get<std::string>();
      if (ch.contains("delta") && ch["delta"].contains("content")) s.text += ch["delta"]["content"].get<std::string>();
      if (!ch["finish_reason"].is_null()) {
        EXPECT_TRUE(s.finish.empty()) << "two chunks with a finish_reason";
        s.finish = ch["finish_reason"];
      }
    }
  }
  return s;
}

std::string completion_body(const std::string& prompt, int max_tokens, bool stream = false) {
  return json{{"model", "tiny-gpt2"}, {"prompt", prompt}, {"max_tokens", max_tokens}, {"temperature", 0},
              {"stream", stream}}
      .dump();
}

class ServeHttp : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    model_dir_ = make_model_dir();
    server_ = std::make_unique<ServeProcess>(model_dir_, std::vector<std::string>{
                                                             "--max-body-bytes", "4096", "--step-delay-ms", "2"});
  }
  static void TearDownTestSuite() {
    if (server_) {
      EXPECT_EQ(server_->terminate(), 0);
    }
    server_.reset();
  }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << "ds-serve did not start: " << server_->banner(); }

  static json node(const std::string& args) {
    const fs::path stamp = kNpm / "node_modules/.ds-packages";
    EXPECT_TRUE(fs::exists(stamp)) << "the openai npm client is not installed in " << kNpm
                                   << ": run through ctest (fixture serve_npm_setup) or `bash tests/inference/serve_npm_setup.sh "
                                   << kNpm.string() << "`";
    const fs::path script = fs::path(DS_SOURCE_DIR) / "tests/inference/serve_openai_client.mjs";
    // The script resolves `openai` from the npm folder: run it from a copy there.
    fs::copy_file(script, kNpm / "serve_openai_client.mjs", fs::copy_options::overwrite_existing);
    const auto r = run_command("node '" + (kNpm / "serve_openai_client.mjs").string() + "' " + args);
    EXPECT_EQ(r.status, 0) << r.out;
    return json::parse(r.out, nullptr, false);
  }

  static inline std::string model_dir_;
  static inline std::unique_ptr<ServeProcess> server_;
};

TEST_F(ServeHttp, OpenAIClientCompletionsChatStreamingErrors) {
  const json r = node("basic " + server_->url("/v1") + " tiny-gpt2");
  ASSERT_TRUE(r.is_object()) << r;
  EXPECT_EQ(r["completion"]["object"], "text_completion");
  EXPECT_EQ(r["completion"]["finish"], "length");
  EXPECT_EQ(r["completion"]["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(r["completion"]["usage"]["completion_tokens"], 8);
  EXPECT_EQ(r["completion"]["usage"]["total_tokens"], 13);
  EXPECT_EQ(r["stream"]["text"], r["completion"]["text"]) << "greedy streamed text differs from the whole answer";
  EXPECT_GE(r["stream"]["chunks"].get<int>(), 2);
  EXPECT_EQ(r["stream"]["finish"], "length");

  EXPECT_EQ(r["chat"]["object"], "chat.completion");
  EXPECT_EQ(r["chat"]["role"], "assistant");
  EXPECT_EQ(r["chat"]["finish"], "length");
  EXPECT_EQ(r["chat"]["usage"]["completion_tokens"], 6);
  EXPECT_EQ(r["chat_stream"]["role"], "assistant");
  EXPECT_EQ(r["chat_stream"]["content"], r["chat"]["content"]);
  EXPECT_EQ(r["chat_stream"]["finish"], "length");
  EXPECT_EQ(r["chat_stream"]["usage"]["completion_tokens"], 6);
  EXPECT_EQ(r["chat_stream"]["usage"]["prompt_tokens"], r["chat"]["usage"]["prompt_tokens"]);

  EXPECT_EQ(r["models"], json::array({"tiny-gpt2"}));
  EXPECT_EQ(r["zero_max_tokens"]["status"], 400);
  EXPECT_EQ(r["zero_max_tokens"]["class"], "BadRequestError");
  EXPECT_EQ(r["zero_max_tokens"]["param"], "max_tokens");
  EXPECT_EQ(r["unknown_model"]["status"], 404);
  EXPECT_EQ(r["unknown_model"]["code"], "model_not_found");
}

// n, logprobs, echo, stop and the penalties through the official client. The tiny model's text is
// arbitrary, so every check compares answers with each other: greedy choices equal, seeded draws
// repeated, echo = prompt + the plain answer, a stop string taken from the plain answer cuts it there.
TEST_F(ServeHttp, OpenAIClientChoicesLogprobsEchoStop) {
  const json r = node("fields " + server_->url("/v1") + " tiny-gpt2");
  ASSERT_TRUE(r.is_object()) << r;
  const std::string plain = r["plain"]["text"];

  // n: one sequence per choice, indexes 0..n-1; prompt tokens counted once, completion tokens summed.
  EXPECT_EQ(r["n_greedy"]["indexes"], json::array({0, 1}));
  ASSERT_EQ(r["n_greedy"]["texts"].size(), 2u);
  EXPECT_EQ(r["n_greedy"]["texts"][0], r["n_greedy"]["texts"][1]) << "greedy choices differ";
  EXPECT_EQ(r["n_greedy"]["usage"]["completion_tokens"], 16);
  EXPECT_EQ(r["n_greedy"]["usage"]["prompt_tokens"], r["plain"]["usage"]["prompt_tokens"]);
  ASSERT_EQ(r["n_seeded"][0].size(), 3u);
  EXPECT_EQ(r["n_seeded"][0], r["n_seeded"][1]) << "a seeded request with n = 3 did not reproduce";
  EXPECT_FALSE(r["n_seeded"][0][0] == r["n_seeded"][0][1] && r["n_seeded"][0][1] == r["n_seeded"][0][2])
      << "every seeded choice drew the same text: " << r["n_seeded"][0];
  for (const char* i : {"0", "1"}) {
    EXPECT_EQ(r["n_stream"]["choices"][i]["text"], r["n_greedy"]["texts"][0]) << "streamed choice " << i;
    EXPECT_EQ(r["n_stream"]["choices"][i]["finish"], "length");
  }
  std::set<int> indexes(r["n_stream"]["order"].begin(), r["n_stream"]["order"].end());
  EXPECT_EQ(indexes, (std::set<int>{0, 1}));
  ASSERT_EQ(r["chat_n"].size(), 2u);
  EXPECT_EQ(r["chat_n"][1]["index"], 1);
  EXPECT_EQ(r["chat_n"][0]["content"], r["chat_n"][1]["content"]);

  // logprobs (completions): one entry per token; greedy picks the best alternative.
  const json& lp = r["logprobs"]["logprobs"];
  ASSERT_TRUE(lp.is_object()) << r["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << lp;
  ASSERT_EQ(lp["token_logprobs"].size(), 6u);
  ASSERT_EQ(lp["top_logprobs"].size(), 6u);
  ASSERT_EQ(lp["text_offset"].size(), 6u);
  for (size_t i = 0; i < 6; ++i) {
    const double chosen = lp["token_logprobs"][i];
    EXPECT_LE(chosen, 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u) << "tokens that are not whole UTF-8 must stay distinct keys";
    for (const auto& [tok, v] : lp["top_logprobs"][i].items()) EXPECT_LE(v.get<double>(), chosen + 1e-6) << tok;
    if (i > 0) {
      EXPECT_GE(lp["text_offset"][i], lp["text_offset"][i - 1]);
    }
  }
  EXPECT_EQ(lp["text_offset"][0], 0);
  const json& clp = r["chat_logprobs"]["content"];
  ASSERT_EQ(clp.size(), r["chat_logprobs"]["usage"]["completion_tokens"].get<size_t>()) << clp;
  for (const auto& e : clp) {
    EXPECT_TRUE(e["token"].is_string() && e["logprob"].is_number() && e["bytes"].is_array()) << e;
    EXPECT_EQ(e["top_logprobs"].size(), 2u) << e;
    EXPECT_GE(e["logprob"].get<double>() + 1e-6, e["top_logprobs"][0]["logprob"].get<double>());
  }
  EXPECT_EQ(r["logprobs_stream"]["choices"]["0"]["logprobs"], 6) << "streamed chunks carry every token's logprobs";

  // echo: the prompt opens the text; with logprobs it is refused naming echo.
  EXPECT_EQ(r["echo"]["text"], "The quick" + plain);
  EXPECT_EQ(r["echo"]["usage"]["completion_tokens"], r["plain"]["usage"]["completion_tokens"]);
  EXPECT_EQ(r["echo_with_logprobs"]["status"], 400);
  EXPECT_EQ(r["echo_with_logprobs"]["param"], "echo");

  // stop: matched on the text (bytes are tokens here, so the 3-character stop spans 3 tokens).
  ASSERT_TRUE(r["stop_string"].is_string()) << "no 3 printable characters in the greedy text: " << plain;
  const std::string stop = r["stop_string"];
  const std::string want = plain.substr(0, plain.find(stop));
  EXPECT_EQ(r["stop"]["text"], want) << "stop " << json(stop);
  EXPECT_EQ(r["stop"]["finish"], "stop");
  EXPECT_LE(r["stop"]["usage"]["completion_tokens"], r["plain"]["usage"]["completion_tokens"]);
  EXPECT_GE(r["stop"]["usage"]["completion_tokens"].get<size_t>(), want.size() + stop.size() > 0 ? 1u : 0u);
  EXPECT_EQ(r["stop_stream"]["choices"]["0"]["text"], want) << "the stream sent text of the stop string or past it";
  EXPECT_EQ(r["stop_stream"]["choices"]["0"]["finish"], "stop");

  // Penalties accepted in range, refused outside; wrong n / logprobs / top_logprobs name the field.
  EXPECT_EQ(r["penalties"]["status"], 200);
  for (const auto& [name, param] : std::vector<std::pair<std::string, std::string>>{
           {"bad_penalty", "presence_penalty"}, {"bad_n", "n"}, {"bad_logprobs", "logprobs"},
           {"bad_top_logprobs", "top_logprobs"}}) {
    EXPECT_EQ(r[name]["status"], 400) << name << ": " << r[name];
    EXPECT_EQ(r[name]["class"], "BadRequestError") << name;
    EXPECT_EQ(r[name]["param"], param) << name;
  }
}

// best_of through the official client: the n returned are the candidates (the choices n = best_of
// gives with the same seed) with the highest mean token logprob, best first; usage counts every
// candidate; best_of below n, above 20 or with stream is refused naming best_of.
TEST_F(ServeHttp, OpenAIClientBestOfReturnsTheBestCandidates) {
  const json r = node("best_of " + server_->url("/v1") + " tiny-gpt2");
  ASSERT_TRUE(r.is_object()) << r;
  ASSERT_EQ(r["candidates"].size(), 4u) << r;
  std::vector<std::pair<double, std::string>> ranked;  // (mean token logprob, text)
  for (const auto& c : r["candidates"]) {
    double sum = 0;
    for (const auto& lp : c["token_logprobs"]) sum += lp.get<double>();
    ASSERT_FALSE(c["token_logprobs"].empty()) << c;
    ranked.emplace_back(sum / static_cast<double>(c["token_logprobs"].size()), c["text"]);
  }
  std::stable_sort(ranked.begin(), ranked.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  EXPECT_EQ(r["best"]["texts"], json::array({ranked[0].second, ranked[1].second})) << r["candidates"];
  EXPECT_EQ(r["best"]["indexes"], json::array({0, 1}));
  EXPECT_EQ(r["best"]["logprobs"], json::array({nullptr, nullptr})) << "logprobs sent that were not asked for";
  EXPECT_EQ(r["best"]["usage"]["completion_tokens"], r["candidates_usage"]["completion_tokens"])
      << "usage must count every candidate's tokens";
  EXPECT_EQ(r["best_with_logprobs"]["text"], ranked[0].second);
  EXPECT_EQ(r["best_with_logprobs"]["logprobs"]["top_logprobs"][0].size(), 1u);
  for (const char* name : {"below_n", "too_many", "streamed"}) {
    EXPECT_EQ(r[name]["status"], 400) << name << ": " << r[name];
    EXPECT_EQ(r[name]["param"], "best_of") << name;
  }
}

TEST_F(ServeHttp, GreedyOutputEqualsPipeline) {
  auto pipe = inference::Pipeline::from_pretrained(model_dir_);
  const auto codec = data::TextCodec::bytes();
  for (const std::string prompt : {"Hello", "The quick brown fox"}) {
    const auto want = pipe.generate({codec.encode(prompt, true)}, inference::testing::greedy(20));
    const std::string text = codec.decode(want[0].tokens);
    const Http h = curl(server_->url("/v1/completions"), completion_body(prompt, 20));
    ASSERT_EQ(h.status, 200) << h.body;
    const json j = json::parse(h.body);
    EXPECT_EQ(j["choices"][0]["text"], text) << prompt;
    EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int64_t>(want[0].tokens.size()));
    EXPECT_EQ(parse_sse(curl(server_->url("/v1/completions"), completion_body(prompt, 20, true)).body).text, text);
  }
}

TEST_F(ServeHttp, SseFraming) {
  const Http h = curl(server_->url("/v1/completions"), completion_body("Hello", 6, true));
  ASSERT_EQ(h.status, 200) << h.body;
  EXPECT_NE(h.headers.find("Content-Type: text/event-stream"), std::string::npos) << h.headers;
  EXPECT_TRUE(h.body.ends_with("data: [DONE]\n\n")) << h.body;
  const Sse s = parse_sse(h.body);
  EXPECT_TRUE(s.done);
  ASSERT_GE(s.chunks.size(), 2u);
  for (const auto& c : s.chunks) EXPECT_EQ(c["object"], "text_completion");
  EXPECT_EQ(s.finish, "length");
  EXPECT_FALSE(s.chunks.back()["choices"][0]["finish_reason"].is_null()) << "finish_reason is not on the last chunk";

  const Http chat = curl(server_->url("/v1/chat/completions"),
                         R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":4,"stream":true})");
  const Sse cs = parse_sse(chat.body);
  ASSERT_FALSE(cs.chunks.empty()) << chat.body;
  EXPECT_EQ(cs.chunks.front()["object"], "chat.completion.chunk");
  EXPECT_EQ(cs.chunks.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(cs.done);
}

TEST_F(ServeHttp, BadInputsGetOpenAIErrors) {
  struct Case {
    std::string name, body;
    int status;
    std::string param, code;
  };
  const std::vector<Case> cases = {
      {"malformed JSON", R"({"prompt": "Hi", "max_tokens": )", 400, "", "invalid_json"},
      {"wrong type", R"({"prompt": "Hi", "temperature": "hot"})", 400, "temperature", "invalid_type"},
      {"wrong type in chat", R"({"messages": [{"role": "user", "content": 7}]})", 400, "messages[0].content", ""},
      {"invalid UTF-8", "{\"prompt\": \"Hi \xc3\x28\"}", 400, "", "invalid_encoding"},
      {"prompt over the context", completion_body(std::string(200, 'a'), 4), 400, "prompt", "context_length_exceeded"},
      {"max_tokens 0", completion_body("Hi", 0), 400, "max_tokens", ""},
      {"max_tokens huge", completion_body("Hi", 100000), 400, "max_tokens", "context_length_exceeded"},
      {"oversized body", completion_body(std::string(5000, 'a'), 4), 413, "", "request_too_large"},
  };
  for (const auto& c : cases) {
    const std::string path = c.name == "wrong type in chat" ? "/v1/chat/completions" : "/v1/completions";
    const Http h = curl(server_->url(path), c.body);
    EXPECT_EQ(h.status, c.status) << c.name << ": " << h.body;
    const json e = h.error();
    ASSERT_TRUE(e.is_object()) << c.name << ": not OpenAI's error JSON: " << h.body;
    EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << c.name;
    EXPECT_TRUE(e["type"].is_string()) << c.name;
    EXPECT_TRUE(e.contains("param") && e.contains("code")) << c.name;
    if (!c.param.empty()) {
      EXPECT_EQ(e["param"], c.param) << c.name << ": " << h.body;
    }
    if (!c.code.empty()) {
      EXPECT_EQ(e["code"], c.code) << c.name << ": " << h.body;
    }
  }
  // Unknown fields are ignored, as OpenAI does.
  EXPECT_EQ(curl(server_->url("/v1/completions"), R"({"prompt":"Hi","max_tokens":2,"no_such_field":[1,{"a":2}]})").status,
            200);
  const Http unknown = curl(server_->url("/v1/nothing-here"));
  EXPECT_EQ(unknown.status, 404);
  EXPECT_TRUE(unknown.error().is_object()) << unknown.body;
  EXPECT_EQ(curl(server_->url("/health")).status, 200) << "the server stopped answering after bad inputs";
}

TEST_F(ServeHttp, LoadBurstWithDroppedStreamsLeavesNoKvBlocksInUse) {
  const json r = node("load " + server_->url("/v1") + " tiny-gpt2 16 60");
  ASSERT_TRUE(r.is_object()) << r;
  EXPECT_EQ(r["failed"], 0) << r["errors"];
  EXPECT_EQ(r["done"].get<int>() + r["dropped"].get<int>(), 60) << r;
  EXPECT_EQ(r["dropped"], 15);
  EXPECT_TRUE(wait_metric(*server_, "ds_serve_kv_blocks_in_use", 0, 5s))
      << "KV blocks still held after the burst: " << curl(server_->url("/metrics")).body;
  EXPECT_TRUE(wait_metric(*server_, "ds_serve_requests_in_flight", 0, 5s));
  EXPECT_GT(metric(*server_, "ds_serve_kv_blocks_total"), 0);
  EXPECT_GE(metric(*server_, "ds_serve_time_to_first_token_seconds_count"), 60);
  EXPECT_GT(metric(*server_, "ds_serve_inter_token_latency_seconds_count"), 0);
  EXPECT_GT(metric(*server_, "ds_serve_generated_tokens_total"), 0);
  EXPECT_GE(metric(*server_, "ds_serve_tokens_per_second"), 0);
  EXPECT_EQ(metric(*server_, "ds_serve_queue_length"), 0);
  const Http after = curl(server_->url("/v1/completions"), completion_body("Still there?", 3));
  EXPECT_EQ(after.status, 200) << after.body;
}

class ServeLimits : public ::testing::Test {
 protected:
  // 50 ms per engine step: a 40-token stream holds its slot ~2 s; 120 tokens would take 6 s and meet
  // the 3 s timeout. Wide margins: CI runs this beside other tests on 2 cores (process start-up alone
  // can take half a second there).
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServeProcess>(make_model_dir(),
                                             std::vector<std::string>{"--max-concurrent", "1", "--step-delay-ms", "50",
                                                                      "--request-timeout-s", "3"});
  }
  static void TearDownTestSuite() { server_.reset(); }
  void SetUp() override { ASSERT_GT(server_->port(), 0) << "ds-serve did not start: " << server_->banner(); }

  // A streamed request in the background; wait() returns its answer.
  struct Background {
    std::thread t;
    Http h;
    void wait() {
      if (t.joinable()) t.join();
    }
    ~Background() { wait(); }
  };
  static void start_stream(Background& b, int max_tokens, const std::string& extra = "") {
    const std::string url = server_->url("/v1/completions");
    b.t = std::thread([&b, url, max_tokens, extra] { b.h = curl(url, completion_body("Hello", max_tokens, true), extra); });
    ASSERT_TRUE(wait_metric(*server_, "ds_serve_requests_in_flight", 1, 5s)) << "the stream never started";
  }

  static inline std::unique_ptr<ServeProcess> server_;
};

TEST_F(ServeLimits, OverMaxConcurrentIs429) {
  Background first;
  start_stream(first, 40);
  const Http h = curl(server_->url("/v1/completions"), completion_body("Hi", 2));
  EXPECT_EQ(h.status, 429) << h.body;
  EXPECT_EQ(h.error()["type"], "rate_limit_error") << h.body;
  first.wait();
  EXPECT_TRUE(parse_sse(first.h.body).done) << "the request holding the slot was disturbed: " << first.h.body;
  EXPECT_EQ(curl(server_->url("/v1/completions"), completion_body("Hi", 2)).status, 200) << "the slot was not released";
}

TEST_F(ServeLimits, ClientGoneMidStreamFreesItsKvBlocksAtOnce) {
  const double dropped_before = metric(*server_, "ds_serve_requests_total{endpoint=\"completions\",status=\"499\"}");
  const auto t0 = std::chrono::steady_clock::now();
  Background b;
  start_stream(b, 120, "--max-time 0.8");  // 120 tokens would run 6 s (the timeout stops it at 3 s)
  bool held = false;  // the gauge follows the engine step by step
  for (int i = 0; i < 100 && !held; ++i, std::this_thread::sleep_for(10ms))
    held = metric(*server_, "ds_serve_kv_blocks_in_use") > 0;
  EXPECT_TRUE(held) << "the stream never held KV blocks";
  b.wait();
  EXPECT_TRUE(wait_metric(*server_, "ds_serve_kv_blocks_in_use", 0, 3s));
  const double freed_after = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(freed_after, 2.4) << "the request kept running after its client left (blocks freed only at "
                              << freed_after << " s)";
  EXPECT_TRUE(wait_metric(*server_, "ds_serve_requests_in_flight", 0, 2s));
  EXPECT_EQ(metric(*server_, "ds_serve_requests_total{endpoint=\"completions\",status=\"499\"}"),
            std::max(dropped_before, 0.0) + 1);
  EXPECT_EQ(curl(server_->url("/health")).status, 200);
}

TEST_F(ServeLimits, PastTheRequestTimeoutIs503) {
  const auto t0 = std::chrono::steady_clock::now();
  const Http h = curl(server_->url("/v1/completions"), completion_body("Hello", 120));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(h.status, 503) << h.body;
  EXPECT_EQ(h.error()["code"], "request_timeout") << h.body;
  EXPECT_LT(took, 5.0);
  EXPECT_TRUE(wait_metric(*server_, "ds_serve_kv_blocks_in_use", 0, 2s));
}

TEST_F(ServeLimits, SigtermFinishesInFlightRequestAndExitsZero) {
  Background b;
  start_stream(b, 20);
  EXPECT_EQ(server_->terminate(), 0);
  b.wait();
  const Sse s = parse_sse(b.h.body);
  EXPECT_TRUE(s.done) << b.h.body;
  EXPECT_EQ(s.finish, "length") << "the in-flight request was not finished: " << b.h.body;
}

// ds-serve --tensor-parallel 2 launched by ds-run on 2 ranks: rank 0 serves, rank 1 runs its
// forwards over half the heads. Answers equal the one-process Pipeline (plain and streamed); the
// server idles past the watchdog's timeout (3 s here) and still answers (the leader keeps its
// follower alive); SIGTERM to ds-run drains rank 0, releases rank 1, and everything exits 0.
TEST(ServeTensorParallel, TwoRanksAnswerAsOneAndStopOnSigterm) {
  const std::string dir = make_model_dir();
  const std::string ds_run = (fs::path(DS_BINARY_DIR) / "tools/ds-run").string();
  ServeProcess server(dir, {"--tensor-parallel", "2"},
                      {"env", "DS_COMM_TIMEOUT_S=3", "OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                       ds_run, "--num_procs", "2"});
  ASSERT_GT(server.port(), 0) << "ds-serve did not start: " << server.banner();
  EXPECT_NE(server.banner().find("tensor-parallel over 2 ranks"), std::string::npos) << server.banner();
  auto pipe = inference::Pipeline::from_pretrained(dir);
  const auto codec = data::TextCodec::bytes();
  for (const std::string prompt : {"Hello", "The quick brown fox"}) {
    const auto want = pipe.generate({codec.encode(prompt, true)}, inference::testing::greedy(20));
    const std::string text = codec.decode(want[0].tokens);
    const Http h = curl(server.url("/v1/completions"), completion_body(prompt, 20));
    ASSERT_EQ(h.status, 200) << h.body;
    EXPECT_EQ(json::parse(h.body)["choices"][0]["text"], text) << prompt;
    EXPECT_EQ(parse_sse(curl(server.url("/v1/completions"), completion_body(prompt, 20, true)).body).text, text);
  }
  std::this_thread::sleep_for(5s);  // idle longer than DS_COMM_TIMEOUT_S
  const Http after = curl(server.url("/v1/completions"), completion_body("Hello", 4));
  EXPECT_EQ(after.status, 200) << after.body;
  EXPECT_EQ(server.terminate(), 0);
}

}  // namespace
}  // namespace ds::serve::testing
