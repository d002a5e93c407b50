// ds::serve::Server: the OpenAI-compatible HTTP front of a ServingLoop (cpp-httplib, Debian's
// libcpp-httplib). Endpoints: POST /v1/completions, POST /v1/chat/completions (JSON or server-sent
// events with "stream": true), GET /v1/models, /health, /metrics. Limits: body size (413), prompt
// tokens and context (400), concurrent generations (429), per-request timeout and shutdown (503);
// every refusal is OpenAI's error JSON. shutdown() drains: new generations get 503, in-flight ones
// finish (or are cancelled after the grace period), then serve() returns.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "serve/metrics.h"
#include "serve/serving_loop.h"
#include "data/text_codec.h"

namespace ds::serve {

struct ServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                     // 0: any free port (bind() returns it)
  std::string model_name = "model";    // the id /v1/models lists and requests may name
  int max_concurrent = 64;             // generations in flight; more → 429
  size_t max_body_bytes = 1 << 20;     // larger bodies → 413
  int64_t max_prompt_tokens = 0;       // 0: the model's context − 1
  double request_timeout_s = 600;      // a generation still running after this → 503 (stream: an error event)
  double shutdown_grace_s = 30;        // after shutdown(), in-flight generations get this long to finish
};

class Server {
 public:
  Server(ServerOptions options, ServingLoop& loop, const data::TextCodec& codec, Metrics& metrics);
  ~Server();

  // Binds the listening socket; returns the port. ds::Error naming host:port when it cannot.
  int bind();
  // Answers requests until shutdown() has drained them.
  void serve();
  // Any thread: stop taking generations, let in-flight ones finish (cancel them after the grace
  // period), then make serve() return.
  void shutdown();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ds::serve
