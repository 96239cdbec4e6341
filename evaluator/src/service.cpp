#include "dice/evaluator/service.h"

#include <fmt/format.h>
#include <fmt/ostream.h>
#include <httplib.h>

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <ostream>
#include <thread>

#include "dice/core/error.h"
#include "dice/core/file_lock.h"
#include "dice/core/hash.h"
#include "dice/evaluator/evaluate.h"
#include "dice/evaluator/pipeline.h"
#include "dice/evaluator/store.h"
#include "record_parts.h"

namespace dice::eval {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr const char* kApi = "dice-eval/1";

void reply(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump() + "\n", "application/json");
}

int int_option(const json& given, const char* key, int fallback, int low, int high) {
  if (!given.contains(key)) return fallback;
  const json& v = given.at(key);
  if (!v.is_number_integer() || v.get<long long>() < low || v.get<long long>() > high)
    throw InputError(fmt::format("options.{}: expected an integer in [{}, {}], got {}", key, low,
                                 high, v.dump()));
  return v.get<int>();
}

json run_json(const RunInfo& run) {
  return {{"batch", run.id},  {"state", run.state},     {"total", run.total},
          {"done", run.done}, {"options", run.options}, {"created_at", run.created_at}};
}

/// The server: one pipeline for all batches, the store underneath.
class Service {
 public:
  Service(const ServiceOptions& options, std::ostream& log)
      : options_(options),
        log_(log),
        lock_(options.store_dir / ".lock", "store folder " + options.store_dir.string()),
        store_(options.store_dir / "results.db") {}

  void run(std::stop_token stop, const std::function<void(int)>& on_ready);

 private:
  void start_pipeline();
  void resume_batches();
  void submit(const httplib::Request& req, httplib::Response& res);
  void status(const httplib::Request& req, httplib::Response& res);
  void results(const httplib::Request& req, httplib::Response& res);
  void health(httplib::Response& res);
  Problem resolve_problem(const json& spec, std::size_t index);
  void on_record(const Job& job, const EvalRecord& record);
  void log(const std::string& line) {
    const std::lock_guard lock(log_mutex_);
    log_ << line << '\n';
    log_.flush();
  }

  const ServiceOptions& options_;
  std::ostream& log_;
  std::mutex log_mutex_;
  FileLock lock_;
  ResultStore store_;
  std::optional<Toolchain> toolchain_;
  std::vector<std::string> devices_;
  std::string device_note_;
  std::mutex problems_mutex_;
  std::map<std::string, Problem> kernelbench_;  // loaded on first use
  bool kernelbench_loaded_ = false;
  std::mutex changed_mutex_;
  std::condition_variable changed_;
  std::uint64_t version_ = 0;
  std::atomic<bool> stopping_{false};
  std::unique_ptr<Pipeline> pipeline_;  // last: stopped before the rest goes
};

void Service::start_pipeline() {
  const EvalOptions& base = options_.base;
  toolchain_ = query_toolchain(base.python, std::chrono::seconds(300));
  devices_ = evaluation_devices(base.device, base.gpus, *toolchain_);
  if (devices_.empty())
    device_note_ = "the service runs without a device: candidates were compiled, not run";
  PipelineConfig config =
      pipeline_config(base, base.arch, options_.store_dir / "logs", devices_, device_note_);
  pipeline_ = std::make_unique<Pipeline>(
      *toolchain_, std::move(config), store_,
      [this](const Job& job, const EvalRecord& record) { on_record(job, record); });
}

void Service::resume_batches() {
  for (const RunInfo& run : store_.runs("batch", "running")) {
    std::vector<Job> jobs;
    const json options = batch_options(run.options, options_.base);
    for (auto& item : store_.items(run.id, true)) jobs.push_back({std::move(item), options});
    log(fmt::format("batch {}: resuming, {} of {} candidates left", run.id, jobs.size(),
                    run.total));
    if (jobs.empty()) store_.set_run_state(run.id, "finished");
    pipeline_->submit(std::move(jobs));
  }
}

void Service::on_record(const Job& job, const EvalRecord& record) {
  const auto run = store_.run(job.item.run_id);
  if (run && run->done >= run->total) store_.set_run_state(run->id, "finished");
  log(fmt::format("batch {}: {}/{} {} {} -> {}", job.item.run_id, run ? run->done : 0,
                  run ? run->total : 0, record.problem_id, record.candidate,
                  to_string(record.verdict)));
  {
    const std::lock_guard lock(changed_mutex_);
    ++version_;
  }
  changed_.notify_all();
}

Problem Service::resolve_problem(const json& spec, std::size_t index) {
  if (spec.is_string()) {
    std::string id = spec.get<std::string>();
    if (id.starts_with("kernelbench:")) id = id.substr(12);
    const std::lock_guard lock(problems_mutex_);
    if (!kernelbench_loaded_) {
      for (auto& p : load_problems("kernelbench:L1,L2,L3", options_.base.kernelbench_jsonl))
        kernelbench_.emplace(p.id, std::move(p));
      kernelbench_loaded_ = true;
    }
    const auto it = kernelbench_.find(id);
    if (it == kernelbench_.end())
      throw InputError(fmt::format("items[{}].problem: no KernelBench problem {}", index, id));
    return it->second;
  }
  if (!spec.is_object() || !spec.contains("code") || !spec.at("code").is_string())
    throw InputError(fmt::format(
        "items[{}].problem: expected a KernelBench id (\"L1/19\") or {{\"code\": ...}}", index));
  Problem p;
  p.code = spec.at("code").get<std::string>();
  p.id = spec.value("id", "custom/" + sha256_hex(p.code).substr(0, 12));
  p.name = spec.value("name", p.id);
  p.level = 0;
  p.origin = "service";
  return p;
}

void Service::submit(const httplib::Request& req, httplib::Response& res) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    return reply(res, 400, {{"error", std::string("the body is not JSON: ") + e.what()}});
  }
  try {
    if (!body.is_object() || !body.contains("items") || !body.at("items").is_array() ||
        body.at("items").empty())
      throw InputError("expected {\"items\": [{\"problem\": ..., \"candidate\": ...}, ...]}");
    const json& items = body.at("items");
    if (items.size() > static_cast<std::size_t>(options_.max_items))
      throw InputError(
          fmt::format("{} items: at most {} per batch", items.size(), options_.max_items));
    const json options = batch_options(body.value("options", json()), options_.base);
    std::vector<Problem> problems;
    std::vector<Candidate> candidates;
    problems.reserve(items.size());
    candidates.reserve(items.size());
    for (std::size_t i = 0; i < items.size(); ++i) {
      const json& item = items.at(i);
      if (!item.is_object() || !item.contains("candidate") || !item.at("candidate").is_string())
        throw InputError(
            fmt::format("items[{}]: expected {{\"problem\", \"candidate\": TEXT}}", i));
      problems.push_back(resolve_problem(item.value("problem", json()), i));
      Candidate c;
      c.problem_id = problems.back().id;
      c.text = item.at("candidate").get<std::string>();
      c.label = item.contains("label") && item.at("label").is_string()
                    ? item.at("label").get<std::string>()
                    : fmt::format("item {}", i);
      candidates.push_back(std::move(c));
    }
    std::vector<std::pair<const Problem*, const Candidate*>> pairs;
    for (std::size_t i = 0; i < items.size(); ++i) pairs.emplace_back(&problems[i], &candidates[i]);
    const std::int64_t id = store_.create_run("batch", options, pairs);
    std::vector<Job> jobs;
    for (auto& item : store_.items(id, true)) jobs.push_back({std::move(item), options});
    pipeline_->submit(std::move(jobs));
    log(fmt::format("batch {}: {} candidates submitted", id, items.size()));
    reply(res, 201,
          {{"batch", id},
           {"items", items.size()},
           {"status", fmt::format("/v1/batches/{}", id)},
           {"results", fmt::format("/v1/batches/{}/results", id)}});
  } catch (const InputError& e) {
    reply(res, 400, {{"error", e.what()}});
  }
}

void Service::status(const httplib::Request& req, httplib::Response& res) {
  const auto run = store_.run(std::stoll(req.matches[1]));
  if (!run || run->kind != "batch") return reply(res, 404, {{"error", "no such batch"}});
  json body = run_json(*run);
  std::map<std::string, int> verdicts;
  for (const auto& s : store_.records(run->id))
    ++verdicts[std::string(to_string(s.record.verdict))];
  body["verdicts"] = verdicts;
  reply(res, 200, body);
}

void Service::results(const httplib::Request& req, httplib::Response& res) {
  const std::int64_t id = std::stoll(req.matches[1]);
  const auto batch = store_.run(id);
  if (!batch || batch->kind != "batch") return reply(res, 404, {{"error", "no such batch"}});
  auto after = std::make_shared<std::int64_t>(0);
  if (req.has_param("after")) {
    try {
      *after = std::stoll(req.get_param_value("after"));
    } catch (const std::exception&) {
      return reply(res, 400, {{"error", "after: expected an integer (a finish number)"}});
    }
  }
  res.set_chunked_content_provider(
      "application/x-ndjson", [this, id, after](std::size_t, httplib::DataSink& sink) {
        for (;;) {
          if (stopping_.load()) return false;
          std::uint64_t seen = 0;
          {
            const std::lock_guard lock(changed_mutex_);
            seen = version_;
          }
          // The run's counts first: if they say "all done", the records read after include all.
          const auto run = store_.run(id);
          if (!run) return false;
          std::int64_t last = *after;
          const auto records = store_.records_after(id, *after, last);
          for (const auto& s : records) {
            const std::string line = json{{"batch", id},
                                          {"seq", s.seq},
                                          {"finish", s.finish_order},
                                          {"record", s.record.to_json()}}
                                         .dump() +
                                     "\n";
            if (!sink.write(line.data(), line.size())) return false;
          }
          *after = last;
          if (!records.empty()) return true;
          if (run->done >= run->total) {
            sink.done();
            return true;
          }
          std::unique_lock lock(changed_mutex_);
          changed_.wait_for(lock, std::chrono::seconds(1), [&] { return version_ != seen; });
          if (!sink.is_writable()) return false;
        }
      });
}

void Service::health(httplib::Response& res) {
  reply(res, 200,
        {{"api", kApi},
         {"ok", pipeline_->error().empty()},
         {"error", pipeline_->error()},
         {"devices", devices_},
         {"note", device_note_},
         {"isolation", pipeline_->isolation()},
         {"policy", options_.base.policy},
         {"torch", toolchain_ ? toolchain_->torch_version : ""},
         {"submitted", pipeline_->submitted()},
         {"finished", pipeline_->finished()}});
}

void Service::run(std::stop_token stop, const std::function<void(int)>& on_ready) {
  start_pipeline();
  httplib::Server server;
  const int threads = std::max(4, options_.http_threads);
  server.new_task_queue = [threads] {
    return std::make_unique<httplib::ThreadPool>(threads).release();
  };
  server.set_payload_max_length(std::size_t{512} << 20);
  server.set_read_timeout(60, 0);
  server.set_write_timeout(60, 0);
  const auto guarded = [](auto handler) {
    return [handler](const httplib::Request& req, httplib::Response& res) {
      try {
        handler(req, res);
      } catch (const std::exception& e) {
        reply(res, 500, {{"error", e.what()}});
      }
    };
  };
  server.Post("/v1/batches", guarded([this](const auto& req, auto& res) { submit(req, res); }));
  server.Get(R"(/v1/batches/(\d+))",
             guarded([this](const auto& req, auto& res) { status(req, res); }));
  server.Get(R"(/v1/batches/(\d+)/results)",
             guarded([this](const auto& req, auto& res) { results(req, res); }));
  server.Get("/v1/health", guarded([this](const auto&, auto& res) { health(res); }));

  int port = options_.port;
  if (port == 0) {
    port = server.bind_to_any_port(options_.host);
    if (port < 0) throw InputError("cannot bind a port on " + options_.host);
  } else if (!server.bind_to_port(options_.host, port)) {
    throw InputError(fmt::format("cannot listen on {}:{} (in use?)", options_.host, port));
  }
  resume_batches();
  std::jthread listener([&] { server.listen_after_bind(); });
  log(
      fmt::format("dice eval serve: listening on http://{}:{} (store {}, workers: {}; default "
                  "policy {}; isolation: {})",
                  options_.host, port, store_.path().string(),
                  devices_.empty() ? device_note_ : fmt::format("{}", fmt::join(devices_, ", ")),
                  options_.base.policy, pipeline_->isolation()));
  if (on_ready) on_ready(port);

  std::mutex wait_mutex;
  std::condition_variable_any wake;
  std::string error;
  {
    std::unique_lock lock(wait_mutex);
    while (!stop.stop_requested()) {
      wake.wait_for(lock, stop, std::chrono::milliseconds(500), [] { return false; });
      error = pipeline_->error();
      if (!error.empty()) break;
    }
  }
  stopping_ = true;
  changed_.notify_all();
  server.stop();
  listener.join();
  pipeline_.reset();  // kills what runs; unfinished batches continue at the next start
  log("dice eval serve: stopped");
  if (!error.empty()) throw Error(error);
}

}  // namespace

json batch_options(const json& given, const EvalOptions& base) {
  const json g = given.is_object() ? given : json::object();
  if (!given.is_null() && !given.is_object()) throw InputError("options: expected an object");
  json out;
  const std::string protocol = g.value("protocol", base.protocol);
  if (protocol != "dice" && protocol != "kernelbench")
    throw InputError("options.protocol: expected dice or kernelbench, got " + protocol);
  out["protocol"] = protocol;
  out["correct_trials"] = int_option(g, "correct_trials", base.correct_trials, 1, 1000);
  out["timing_trials"] = int_option(g, "timing_trials", base.timing_trials, 1, 100000);
  out["warmup"] = int_option(g, "warmup", base.warmup, 0, 100000);
  if (g.contains("seed") && !g.at("seed").is_number_unsigned())
    throw InputError("options.seed: expected a non-negative integer");
  out["seed"] = g.value("seed", base.seed);
  if (g.contains("measure_timing") && !g.at("measure_timing").is_boolean())
    throw InputError("options.measure_timing: expected true or false");
  out["measure_timing"] = g.value("measure_timing", base.measure_timing);
  out["arch"] = base.arch;
  // The rules (RULES.md): part of the batch's options, so that the store keeps them with every
  // item and a batch resumed after a restart runs under the same policy.
  if (g.contains("policy") && !g.at("policy").is_string())
    throw InputError("options.policy: expected strict, lenient or kernelbench");
  out["policy"] = g.value("policy", base.policy);
  std::vector<std::string> overrides = base.rule_overrides;
  if (g.contains("rules")) {
    const json& rules = g.at("rules");
    if (!rules.is_array())
      throw InputError("options.rules: expected a list of \"ID=reject|warn|off\" strings");
    overrides.clear();
    for (const auto& spec : rules) {
      if (!spec.is_string())
        throw InputError("options.rules: expected strings \"ID=reject|warn|off\", got " +
                         spec.dump());
      overrides.push_back(spec.get<std::string>());
    }
  }
  out["rule_overrides"] = overrides;
  try {
    policy_of(out);
  } catch (const InputError& e) {
    throw InputError(std::string("options: ") + e.what());
  }
  return out;
}

void serve(const ServiceOptions& options, std::ostream& log, std::stop_token stop,
           const std::function<void(int)>& on_ready) {
  fs::create_directories(options.store_dir / "logs");
  Service service(options, log);
  service.run(std::move(stop), on_ready);
}

}  // namespace dice::eval
