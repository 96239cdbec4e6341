#pragma once
// An OpenAI-compatible chat-completions server (POST /v1/chat/completions) as the generator of
// `dice bench`, so that autoregressive models served by vLLM, SGLang, llama.cpp or a hosted API
// run through the same harness.

#include <chrono>
#include <optional>
#include <string>

#include "dice/generation/generator.h"

namespace dice::generation {

/// Where and how to ask.
struct EndpointOptions {
  /// http(s)://host[:port][/prefix]: requests go to prefix + /v1/chat/completions (a URL that
  /// already ends in /v1 or /v1/chat/completions is used as such).
  std::string url;
  std::string model;    ///< the request's "model" field
  std::string api_key;  ///< sent as "Authorization: Bearer ..." when not empty
  int concurrency = 8;  ///< requests in flight at once
  int retries = 4;      ///< more tries after a connection error, 408, 429 or 5xx
  std::chrono::milliseconds backoff{1000};  ///< first wait between tries; doubles each time
  std::chrono::seconds timeout{600};        ///< per request (reading the answer)
  std::int64_t max_tokens = 4096;
  double temperature = 0;
  double top_p = 1;
};

/// The path of chat completions under `url`'s path prefix ("/v1/chat/completions" for
/// "http://h:8000", "/api/v1/chat/completions" for "http://h/api/v1"). Throws dice::InputError
/// for a URL that is not http(s)://host[:port][/path].
std::string chat_completions_path(const std::string& url);

/// The generator. Each request is one chat completion with a single user message; the answer's
/// choices[0].message.content is the output, finish_reason its stop reason ("length": the token
/// limit), usage.completion_tokens its token count. A request that fails after every retry (or
/// at once for other 4xx answers) is reported with its error: status and the start of the body.
class EndpointGenerator final : public Generator {
 public:
  /// Throws dice::InputError for a bad URL or concurrency < 1.
  explicit EndpointGenerator(EndpointOptions options);
  void generate(std::span<const SampleRequest> requests, const SampleCallback& done) override;
  std::string describe() const override;

 private:
  SampleOutput ask(const SampleRequest& request) const;
  EndpointOptions options_;
  std::string base_;  ///< scheme://host:port
  std::string path_;
};

}  // namespace dice::generation
