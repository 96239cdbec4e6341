#include "dice/generation/endpoint.h"

#include <fmt/format.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <thread>

#include "dice/core/error.h"

namespace dice::generation {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

struct Url {
  std::string base, path;
};

Url split_url(const std::string& url) {
  static const std::regex re(R"(^(https?://[^/\s]+)(/[^\s]*)?$)");
  std::smatch m;
  if (!std::regex_match(url, m, re))
    throw InputError("--endpoint " + url + ": expected http(s)://host[:port][/path]");
  return {m[1].str(), m[2].matched ? m[2].str() : std::string()};
}

}  // namespace

std::string chat_completions_path(const std::string& url) {
  std::string path = split_url(url).path;
  while (!path.empty() && path.back() == '/') path.pop_back();
  if (path.ends_with("/chat/completions")) return path;
  if (path.ends_with("/v1")) return path + "/chat/completions";
  return path + "/v1/chat/completions";
}

EndpointGenerator::EndpointGenerator(EndpointOptions options) : options_(std::move(options)) {
  base_ = split_url(options_.url).base;
  path_ = chat_completions_path(options_.url);
  if (options_.concurrency < 1)
    throw InputError(fmt::format("--concurrency {}: must be at least 1", options_.concurrency));
}

std::string EndpointGenerator::describe() const {
  return fmt::format("endpoint: {}{} (model {}, {} in flight)", base_, path_,
                     options_.model.empty() ? "unset" : options_.model, options_.concurrency);
}

SampleOutput EndpointGenerator::ask(const SampleRequest& request) const {
  SampleOutput out;
  out.prompt = request.message;
  json body{{"messages", json::array({{{"role", "user"}, {"content", request.message}}})},
            {"max_tokens", options_.max_tokens},
            {"temperature", options_.temperature},
            {"top_p", options_.top_p},
            {"seed", request.seed},
            {"stream", false}};
  if (!options_.model.empty()) body["model"] = options_.model;
  const std::string payload = body.dump(-1, ' ', false, json::error_handler_t::replace);
  httplib::Headers headers;
  if (!options_.api_key.empty()) headers.emplace("Authorization", "Bearer " + options_.api_key);
  const auto start = Clock::now();
  auto wait = options_.backoff;
  std::string last_error;
  for (int attempt = 0; attempt <= options_.retries; ++attempt) {
    if (attempt > 0) {
      std::this_thread::sleep_for(wait);
      wait *= 2;
    }
    httplib::Client client(base_);
    client.set_connection_timeout(std::chrono::seconds(30));
    client.set_read_timeout(options_.timeout);
    client.set_write_timeout(std::chrono::seconds(60));
    const auto res = client.Post(path_, headers, payload, "application/json");
    if (!res) {
      last_error = fmt::format("POST {}{}: {}", base_, path_, httplib::to_string(res.error()));
      continue;
    }
    if (res->status == 408 || res->status == 429 || res->status >= 500) {
      last_error = fmt::format("POST {}{}: HTTP {}: {}", base_, path_, res->status,
                               res->body.substr(0, 300));
      continue;
    }
    if (res->status != 200) {
      out.error = fmt::format("POST {}{}: HTTP {}: {}", base_, path_, res->status,
                              res->body.substr(0, 300));
      return out;
    }
    try {
      const json answer = json::parse(res->body);
      const json& choice = answer.at("choices").at(0);
      const json& content = choice.at("message").at("content");
      out.text = content.is_string() ? content.get<std::string>() : std::string();
      out.stop_reason = choice.value("finish_reason", json("")).is_string()
                            ? choice.value("finish_reason", std::string())
                            : std::string();
      if (answer.contains("usage") && answer.at("usage").contains("completion_tokens"))
        out.output_tokens = answer.at("usage").at("completion_tokens").get<std::int64_t>();
    } catch (const std::exception& e) {
      out.error = fmt::format("POST {}{}: not a chat completion ({}): {}", base_, path_, e.what(),
                              res->body.substr(0, 300));
    }
    out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return out;
  }
  out.error = fmt::format("{} (gave up after {} tries)", last_error, options_.retries + 1);
  out.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return out;
}

void EndpointGenerator::generate(std::span<const SampleRequest> requests,
                                 const SampleCallback& done) {
  std::atomic<std::size_t> next{0};
  std::mutex done_mutex;
  std::exception_ptr failure;
  {
    std::vector<std::jthread> threads;
    const auto n =
        std::min<std::size_t>(static_cast<std::size_t>(options_.concurrency), requests.size());
    for (std::size_t t = 0; t < n; ++t)
      threads.emplace_back([&] {
        for (std::size_t i = next++; i < requests.size(); i = next++) {
          SampleOutput out = ask(requests[i]);
          const std::lock_guard lock(done_mutex);
          if (failure) return;
          try {
            done(requests[i], std::move(out));
          } catch (...) {
            failure = std::current_exception();
            next = requests.size();
          }
        }
      });
  }
  if (failure) std::rethrow_exception(failure);
}

}  // namespace dice::generation
