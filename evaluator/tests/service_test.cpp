#include "dice/evaluator/service.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <future>
#include <map>
#include <sstream>
#include <thread>

#include "dice/core/error.h"
#include "dice/evaluator/store.h"
#include "test_support.h"

namespace dice::eval {
namespace {

using nlohmann::json;
using testing::ScratchDir;

/// A server on a free loopback port in a thread, stopped at destruction.
class Server {
 public:
  Server(const ScratchDir& dir, const std::string& store) {
    options_.port = 0;
    options_.store_dir = dir.path() / store;
    options_.base.device = "cpu";
    options_.base.jobs = 2;
    options_.base.cache_dir = dir.path() / "cache";
    options_.base.python = testing::test_python();
    options_.base.correct_trials = 1;
    options_.base.timing_trials = 2;
    options_.base.warmup = 0;
    options_.base.policy = "kernelbench";  // the candidates are the reference itself
    std::promise<int> ready;
    auto port = ready.get_future();
    thread_ = std::jthread([this, p = std::move(ready)](std::stop_token stop) mutable {
      try {
        serve(options_, log_, stop, [&](int bound) { p.set_value(bound); });
      } catch (...) {
        try {
          p.set_exception(std::current_exception());
        } catch (const std::future_error&) {  // failed after it was ready
        }
      }
    });
    port_ = port.get();
  }
  ~Server() {
    thread_.request_stop();
    thread_.join();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(300, 0);
    return c;
  }

 private:
  ServiceOptions options_;
  std::ostringstream log_;
  int port_ = 0;
  std::jthread thread_;
};

json submit(const Server& server, const json& body) {
  auto res = server.client().Post("/v1/batches", body.dump(), "application/json");
  EXPECT_TRUE(res);
  EXPECT_EQ(res->status, 201) << res->body;
  return json::parse(res->body);
}

/// The NDJSON lines of a batch's results stream (ends when the batch is finished).
std::vector<json> stream(const Server& server, std::int64_t batch, std::int64_t after = 0) {
  std::string body;
  auto res = server.client().Get(
      "/v1/batches/" + std::to_string(batch) + "/results?after=" + std::to_string(after),
      [&](const char* data, std::size_t n) {
        body.append(data, n);
        return true;
      });
  EXPECT_TRUE(res);
  std::vector<json> lines;
  std::istringstream in(body);
  for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
  return lines;
}

std::string slow_problem(double seconds) {
  std::string code = testing::kReluProblem;
  code.replace(code.find("return torch"), 6,
               "import time; time.sleep(" + std::to_string(seconds) + "); return");
  return code;
}

TEST(Service, BatchesStreamVerdictsOnceEvenAcrossRestarts) {
  ScratchDir dir("dice_service");
  const std::string relu = testing::kReluProblem;
  const std::string slow = slow_problem(1.0);
  std::int64_t first = 0, second = 0;
  {
    Server server(dir, "store");
    // Bad submissions are answered with the field at fault.
    auto bad = server.client().Post("/v1/batches", R"({"items": [{"problem": {"code": "x"}}]})",
                                    "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400);
    EXPECT_NE(bad->body.find("items[0]"), std::string::npos) << bad->body;
    EXPECT_EQ(server.client().Get("/v1/batches/999")->status, 404);

    const json made = submit(server, {{"items",
                                       {{{"problem", {{"code", relu}, {"id", "relu"}}},
                                         {"candidate", relu + "\nModelNew = Model\n"},
                                         {"label", "ok"}},
                                        {{"problem", {{"code", relu}, {"id", "relu"}}},
                                         {"candidate", "def broken(:\n"},
                                         {"label", "syntax"}}}},
                                      {"options", {{"timing_trials", 3}}}});
    first = made.at("batch").get<std::int64_t>();
    const auto lines = stream(server, first);
    ASSERT_EQ(lines.size(), 2u);
    std::map<std::string, std::string> verdicts;
    for (const auto& l : lines)
      verdicts[l.at("record").at("candidate")] = l.at("record").at("verdict");
    EXPECT_EQ(verdicts,
              (std::map<std::string, std::string>{{"ok", "correct"}, {"syntax", "parse_error"}}));
    const json status =
        json::parse(server.client().Get("/v1/batches/" + std::to_string(first))->body);
    EXPECT_EQ(status.at("state"), "finished");
    EXPECT_EQ(status.at("options").at("timing_trials"), 3);
    // Reading on from the first line's finish number gives the rest, once.
    EXPECT_EQ(stream(server, first, lines[0].at("finish")).size(), 1u);

    // A batch still running when the server stops...
    json items = json::array();
    for (int i = 0; i < 3; ++i)
      items.push_back({{"problem", {{"code", slow}, {"id", "slow"}}},
                       {"candidate", slow + "\nModelNew = Model\n"},
                       {"label", "slow" + std::to_string(i)}});
    second = submit(server, {{"items", items}}).at("batch");
  }
  Server restarted(dir, "store");  // ...continues when it starts again
  const auto lines = stream(restarted, second);
  ASSERT_EQ(lines.size(), 3u);
  std::set<int> seqs;
  for (const auto& l : lines) {
    seqs.insert(l.at("seq").get<int>());
    EXPECT_EQ(l.at("record").at("verdict"), "correct") << l.dump();
  }
  EXPECT_EQ(seqs, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(stream(restarted, first).size(), 2u);  // the old batch is still there
  const json health = json::parse(restarted.client().Get("/v1/health")->body);
  EXPECT_TRUE(health.at("ok").get<bool>());
}

/// The rules apply to served batches too: the same candidate under options.policy strict is
/// rejected with its rule id (the record says which policy and how it was isolated); under the
/// server's kernelbench it is correct.
TEST(Service, BatchPolicyDecides) {
  ScratchDir dir("dice_service_policy");
  const std::string relu = testing::kReluProblem;
  Server server(dir, "store");
  const json item = {{"problem", {{"code", relu}, {"id", "relu"}}},
                     {"candidate", relu + "\nModelNew = Model\n"}};
  const auto strict =
      submit(server,
             {{"items", {item}}, {"options", {{"policy", "strict"}, {"measure_timing", false}}}})
          .at("batch")
          .get<std::int64_t>();
  const auto plain =
      submit(server, {{"items", {item}}, {"options", {{"measure_timing", false}}}}).at("batch");
  const auto strict_lines = stream(server, strict);
  ASSERT_EQ(strict_lines.size(), 1u);
  const json& rejected = strict_lines[0].at("record");
  EXPECT_EQ(rejected.at("verdict"), "rejected") << rejected.dump();
  EXPECT_EQ(rejected.at("rules"), json({"static.reference_model"})) << rejected.dump();
  EXPECT_EQ(rejected.at("policy"), "strict");
  EXPECT_FALSE(rejected.at("isolation").get<std::string>().empty());
  const auto plain_lines = stream(server, plain);
  ASSERT_EQ(plain_lines.size(), 1u);
  EXPECT_EQ(plain_lines[0].at("record").at("verdict"), "correct") << plain_lines[0].dump();
  EXPECT_EQ(plain_lines[0].at("record").at("policy"), "kernelbench");
}

TEST(Service, OptionsAreValidated) {
  EvalOptions base;
  EXPECT_EQ(batch_options(json(), base).at("protocol"), "dice");
  EXPECT_EQ(batch_options({{"correct_trials", 2}}, base).at("correct_trials"), 2);
  EXPECT_THROW(batch_options({{"correct_trials", 0}}, base), InputError);
  EXPECT_THROW(batch_options({{"protocol", "fast"}}, base), InputError);
  EXPECT_THROW(batch_options({{"measure_timing", "yes"}}, base), InputError);
  EXPECT_THROW(batch_options(json::array(), base), InputError);
  // The rules are batch options (stored, hashed): the server's by default, or the request's.
  EXPECT_EQ(batch_options(json(), base).at("policy"), "strict");
  EXPECT_EQ(batch_options({{"policy", "lenient"}}, base).at("policy"), "lenient");
  EXPECT_EQ(batch_options({{"rules", {"static.*=warn"}}}, base).at("rule_overrides"),
            json({"static.*=warn"}));
  EXPECT_NE(options_hash(batch_options({{"policy", "lenient"}}, base)),
            options_hash(batch_options(json(), base)));
  EXPECT_THROW(batch_options({{"policy", "loose"}}, base), InputError);
  EXPECT_THROW(batch_options({{"rules", {"static.nothing=warn"}}}, base), InputError);
  EXPECT_THROW(batch_options({{"rules", "static.*=warn"}}, base), InputError);
}

}  // namespace
}  // namespace dice::eval
