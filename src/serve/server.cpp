#include "serve/server.h"

#include <httplib.h>

#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <ctime>
#include <thread>

#include "serve/api_error.h"
#include "serve/best_of.h"
#include "serve/choice_stream.h"
#include "serve/prepare.h"
#include "serve/request.h"
#include "serve/responses.h"
#include "util/error.h"

namespace ds::serve {

namespace {

using namespace std::chrono_literals;

constexpr auto kPoll = 100ms;  // how often a waiting HTTP thread looks at its request again

const char* endpoint_label(Endpoint e) { return e == Endpoint::kChat ? "chat" : "completions"; }

std::string finish_word(const RequestEvent& e) { return inference::to_string(e.finish); }

ApiError timeout_error(double s) {
  return ApiError(503, "the request ran past the server's request timeout of " + std::to_string(s) +
                           " s (ds-serve --request-timeout-s); ask for fewer max_tokens or retry later",
                  "timeout_error", "", "request_timeout");
}

// The first event of a submitted request: accepted, or the engine's refusal (→ 400).
void await_admission(RequestHandle& h) {
  while (true) {
    auto e = h.next(kPoll);
    if (!e) continue;
    if (!e->error.empty()) {
      if (e->error == "the server is shutting down")
        throw ApiError(503, "the server is shutting down; retry on another replica", "server_error", "", "shutting_down");
      throw bad_request(e->error, "", "rejected_by_engine");
    }
    if (e->accepted) return;
  }
}

// Aborts what is left of a request when its HTTP answer ends early (an error, a timeout); harmless
// after every choice finished.
struct CancelOnExit {
  RequestHandle& h;
  ~CancelOnExit() { h.cancel(); }
};

}  // namespace

// Outside the anonymous namespace: Server::Impl's lambdas hold them, and a member's closure may not
// have a field of a type with internal linkage (GCC's -Wsubobject-linkage).
// One choice of a streamed response.
struct StreamChoice {
  ChoiceStream text;
  bool done = false;
};

// Everything one streamed response needs after the handler has returned.
struct StreamState {
  std::shared_ptr<RequestHandle> handle;
  std::vector<StreamChoice> choices;
  ResponseContext ctx;
  bool include_usage = false;
  bool logprobs = false;
  double timeout_s = 0;
  bool started = false, finished = false;
  int64_t remaining = 0;                        // choices not finished
  int64_t prompt_tokens = 0, completion_tokens = 0;
  std::atomic<bool> slot_held{true};
  explicit StreamState(std::shared_ptr<RequestHandle> h) : handle(std::move(h)) {}
};

struct Server::Impl {
  ServerOptions opt;
  ServingLoop& loop;
  const data::TextCodec& codec;
  Metrics& metrics;
  httplib::Server http;
  std::atomic<int> in_flight{0};
  std::atomic<int> open_streams{0};  // streamed responses not yet ended (shutdown waits for them)
  std::atomic<bool> draining{false};
  std::atomic<uint64_t> next_id{0};
  int64_t created = std::time(nullptr);

  Impl(ServerOptions o, ServingLoop& l, const data::TextCodec& c, Metrics& m)
      : opt(std::move(o)), loop(l), codec(c), metrics(m) {}

  void count(Endpoint e, int status) {
    metrics.add("ds_serve_requests_total", 1,
                "endpoint=\"" + std::string(endpoint_label(e)) + "\",status=\"" + std::to_string(status) + "\"");
  }

  void answer_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(error_body(e), "application/json");
  }

  // Holds one of the max_concurrent generation slots; a streamed response hands it to its releaser.
  struct Slot {
    Impl* impl;
    bool held = true;
    ~Slot() {
      if (held) impl->release_slot();
    }
  };
  void release_slot() { impl_metrics_in_flight(--in_flight); }
  void impl_metrics_in_flight(int n) { metrics.set("ds_serve_requests_in_flight", n); }

  void generate(const httplib::Request& req, httplib::Response& res, Endpoint ep) {
    const auto arrival = Clock::now();
    if (draining) {
      count(ep, 503);
      return answer_error(res, ApiError(503, "the server is shutting down; retry on another replica", "server_error",
                                        "", "shutting_down"));
    }
    const int n = ++in_flight;
    Slot slot{this};
    impl_metrics_in_flight(n);
    if (n > opt.max_concurrent) {
      count(ep, 429);
      return answer_error(res, ApiError(429,
                                        "too many requests in flight (this server answers " +
                                            std::to_string(opt.max_concurrent) +
                                            " at once, ds-serve --max-concurrent); retry later",
                                        "rate_limit_error", "", "rate_limit_exceeded"));
    }
    try {
      GenerationRequest r = parse_request(req.body, ep);
      if (!r.model.empty() && r.model != opt.model_name)
        throw ApiError(404, "the model '" + r.model + "' does not exist; this server serves '" + opt.model_name + "'",
                       "invalid_request_error", "model", "model_not_found");
      PromptLimits limits{loop.max_positions(), opt.max_prompt_tokens, loop.vocab_size()};
      PreparedRequest p = prepare_request(r, codec, limits);
      // best_of ranks candidates by their tokens' logprobs: have the engine report them.
      if (r.best_of > r.n && !p.params.logprobs) p.params.logprobs = 0;
      const auto deadline = arrival + std::chrono::duration_cast<Clock::duration>(
                                          std::chrono::duration<double>(opt.request_timeout_s));
      auto handle = loop.submit(std::move(p.prompt), choice_params(p.params, r.best_of), arrival, deadline);
      await_admission(*handle);
      const std::string id = (ep == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + std::to_string(next_id++);
      ResponseContext ctx{ep, id, opt.model_name, static_cast<int64_t>(std::time(nullptr))};
      const std::string prefix = !r.echo ? "" : r.prompt_ids ? codec.decode(*r.prompt_ids) : r.prompt;
      if (r.stream) {
        stream(res, std::move(handle), ctx, r, prefix);
        slot.held = false;  // the releaser gives it back when the stream ends
        return;
      }
      whole(res, *handle, ctx, r, prefix);
      count(ep, res.status);
    } catch (const ApiError& e) {
      count(ep, e.status);
      answer_error(res, e);
    }
  }

  // The whole answer: every candidate (best_of of them, n unless best_of says more) run to its end,
  // then the n best returned as choices 0..n-1 (best first); usage counts every candidate's tokens.
  void whole(httplib::Response& res, RequestHandle& h, const ResponseContext& ctx, const GenerationRequest& r,
             const std::string& prefix) {
    CancelOnExit cancel_rest{h};
    const auto candidates = static_cast<size_t>(r.best_of);
    std::vector<ChoiceStream> streams;
    std::vector<ChoiceResult> results(candidates);
    std::vector<CandidateScore> scores(candidates);
    for (size_t i = 0; i < candidates; ++i) {
      streams.emplace_back(codec, r.stop, prefix);
      if (r.logprobs) results[i].logprobs.emplace();
    }
    auto add = [](ChoiceResult& c, ChoiceDelta d) {
      c.text += d.text;
      if (c.logprobs) c.logprobs->insert(c.logprobs->end(), d.logprobs.begin(), d.logprobs.end());
    };
    const std::vector<inference::TokenLogprob> none;
    Usage usage;
    auto remaining = candidates;
    while (remaining > 0) {
      auto e = h.next(kPoll);
      if (!e) continue;
      const auto i = static_cast<size_t>(e->index);
      ChoiceResult& c = results[i];
      if (!c.finish_reason.empty()) continue;  // events after its stop string
      usage.prompt_tokens = e->prompt_tokens;
      const int64_t before = streams[i].num_tokens();
      add(c, streams[i].push(e->tokens, r.logprobs ? e->logprobs : none));
      scores[i].add(e->logprobs, streams[i].num_tokens() - before);
      if (streams[i].stopped()) {
        h.cancel_choice(e->index);  // its sequence ends now; the text ended before the stop string
        c.finish_reason = "stop";
      } else if (e->finished) {
        if (e->timed_out) throw timeout_error(opt.request_timeout_s);
        add(c, streams[i].finish());
        c.finish_reason = finish_word(*e);
      } else {
        continue;
      }
      usage.completion_tokens += streams[i].num_tokens();
      --remaining;
    }
    std::vector<ChoiceResult> choices;
    if (r.best_of > r.n) {
      for (size_t i : best_candidates(scores, r.n)) choices.push_back(std::move(results[i]));
    } else {
      choices = std::move(results);
    }
    for (size_t k = 0; k < choices.size(); ++k) choices[k].index = static_cast<int64_t>(k);
    res.status = 200;
    res.set_content(full_response(ctx, choices, usage), "application/json");
  }

  void stream(httplib::Response& res, std::shared_ptr<RequestHandle> handle, const ResponseContext& ctx,
              const GenerationRequest& r, const std::string& prefix) {
    ++open_streams;
    auto st = std::make_shared<StreamState>(std::move(handle));
    st->ctx = ctx;
    st->include_usage = r.include_usage;
    st->logprobs = r.logprobs.has_value();
    st->timeout_s = opt.request_timeout_s;
    st->remaining = r.n;
    for (int64_t i = 0; i < r.n; ++i) st->choices.push_back({ChoiceStream(codec, r.stop, prefix)});
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider(
        "text/event-stream",
        [st, release = [this] { release_slot(); }](size_t, httplib::DataSink& sink) {
          auto send = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
          if (!st->started) {
            st->started = true;
            // Chat streams open each choice with the assistant role, as OpenAI's do.
            if (st->ctx.endpoint == Endpoint::kChat)
              for (int64_t i = 0; i < static_cast<int64_t>(st->choices.size()); ++i)
                if (!send(sse_event(stream_chunk(st->ctx, i, "", nullptr, std::nullopt, true)))) return false;
          }
          auto e = st->handle->next(kPoll);
          if (!e) return true;  // called again; a gone client shows at the next write
          StreamChoice& c = st->choices[static_cast<size_t>(e->index)];
          if (c.done) return true;  // events after its stop string
          st->prompt_tokens = e->prompt_tokens;
          ChoiceDelta d = c.text.push(e->tokens, e->logprobs);
          auto chunk = [&](const std::optional<std::string>& finish) {
            return sse_event(stream_chunk(st->ctx, e->index, d.text, st->logprobs ? &d.logprobs : nullptr, finish, false));
          };
          // One chunk per engine step that produced tokens, even when they make no text yet (a
          // character still incomplete, or text that may start a stop string): clients see the
          // tokens' timing.
          if (!c.text.stopped() && !e->finished) return e->tokens.empty() || send(chunk(std::nullopt));
          std::string finish = "stop";
          if (c.text.stopped()) {
            st->handle->cancel_choice(e->index);
          } else {
            ChoiceDelta rest = c.text.finish();
            d.text += rest.text;
            d.logprobs.insert(d.logprobs.end(), rest.logprobs.begin(), rest.logprobs.end());
            finish = finish_word(*e);
          }
          c.done = true;
          st->completion_tokens += c.text.num_tokens();
          if (--st->remaining > 0 && !e->timed_out) return send(chunk(finish));
          // Give the slot back before the last bytes go out: a client that sends its next request
          // as soon as it reads [DONE] must not find this one still counted (a spurious 429).
          if (st->slot_held.exchange(false)) release();
          if (e->timed_out) {
            if (!d.text.empty()) send(chunk(std::nullopt));
            send(sse_event(error_body(timeout_error(st->timeout_s))));
            st->handle->cancel();  // the other choices, if any
          } else {
            send(chunk(finish));
          }
          if (st->include_usage) send(sse_event(usage_chunk(st->ctx, {st->prompt_tokens, st->completion_tokens})));
          const bool ok = send(sse_done());
          st->finished = true;
          sink.done();
          return ok;
        },
        [this, st](bool success) {
          // The client went away (or the write failed): abort so the KV blocks come back.
          if (!st->finished) st->handle->cancel();
          count(st->ctx.endpoint, st->finished && success ? 200 : 499);
          if (st->slot_held.exchange(false)) release_slot();
          --open_streams;
        });
  }

  void routes() {
    http.Post("/v1/completions",
              [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, Endpoint::kCompletions); });
    http.Post("/v1/chat/completions",
              [this](const httplib::Request& q, httplib::Response& r) { generate(q, r, Endpoint::kChat); });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(models_response(opt.model_name, created), "application/json");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& r) {
      r.status = draining ? 503 : 200;
      r.set_content(draining ? R"({"status":"shutting down"})" : R"({"status":"ok"})", "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& r) {
      r.set_content(metrics.render(), "text/plain; version=0.0.4");
    });
    // Statuses httplib sets itself (404, 413, 400 for a bad request line) get OpenAI's error body.
    http.set_error_handler([this](const httplib::Request& q, httplib::Response& r) {
      if (!r.body.empty()) return;
      if (r.status == 413)
        answer_error(r, ApiError(413, "the request body is larger than this server's limit of " +
                                          std::to_string(opt.max_body_bytes) + " bytes (ds-serve --max-body-bytes)",
                                 "invalid_request_error", "", "request_too_large"));
      else if (r.status == 404)
        answer_error(r, ApiError(404, "no endpoint " + q.method + " " + q.path +
                                          " (ds-serve answers /v1/completions, /v1/chat/completions, /v1/models, "
                                          "/health, /metrics)",
                                 "invalid_request_error", "", "unknown_url"));
      else
        answer_error(r, ApiError(r.status, "the HTTP request could not be handled (status " +
                                               std::to_string(r.status) + ")",
                                 r.status >= 500 ? "server_error" : "invalid_request_error"));
    });
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& r, std::exception_ptr ep) {
      std::string what = "unknown error";
      try {
        std::rethrow_exception(ep);
      } catch (const std::exception& e) {
        what = e.what();
      } catch (...) {
      }
      spdlog::error("ds-serve: {}", what);
      answer_error(r, ApiError(500, "internal error: " + what, "server_error"));
    });
  }
};

Server::Server(ServerOptions options, ServingLoop& loop, const data::TextCodec& codec, Metrics& metrics)
    : impl_(std::make_unique<Impl>(std::move(options), loop, codec, metrics)) {
  auto& h = impl_->http;
  // One thread per connection being answered: the generation slots plus room for /health,
  // /metrics and the 429s.
  const size_t threads = static_cast<size_t>(impl_->opt.max_concurrent) + 8;
  h.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  h.set_payload_max_length(impl_->opt.max_body_bytes);
  h.set_keep_alive_timeout(2);
  h.set_keep_alive_max_count(1000);  // clients that stream request after request keep their connection
  h.set_read_timeout(30);
  h.set_write_timeout(10);  // a client that never reads is dropped (and its request aborted)
  impl_->routes();
}

Server::~Server() = default;

int Server::bind() {
  auto& o = impl_->opt;
  const int port = o.port == 0 ? impl_->http.bind_to_any_port(o.host) : (impl_->http.bind_to_port(o.host, o.port) ? o.port : -1);
  DS_CHECK(port > 0, Error,
           "ds-serve: cannot listen on " + o.host + ":" + std::to_string(o.port) +
               " (in use or not an address of this machine); pick another --host/--port");
  return port;
}

void Server::serve() { impl_->http.listen_after_bind(); }

void Server::shutdown() {
  auto& im = *impl_;
  im.draining = true;
  // httplib ends chunked responses as soon as its listener closes, so the listener stays open
  // (answering 503) until the in-flight generations are done.
  const auto grace = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                        std::chrono::duration<double>(im.opt.shutdown_grace_s));
  auto busy = [&] { return im.in_flight > 0 || im.open_streams > 0; };
  while (busy() && Clock::now() < grace) std::this_thread::sleep_for(20ms);
  if (busy()) {
    spdlog::warn("ds-serve: {} requests still running after {} s; cancelling them", im.in_flight.load(),
                 im.opt.shutdown_grace_s);
    im.loop.cancel_all();
    const auto hard = Clock::now() + 10s;
    while (busy() && Clock::now() < hard) std::this_thread::sleep_for(20ms);
  }
  im.http.stop();
}

}  // namespace ds::serve
