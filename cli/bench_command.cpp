// `dice bench` and `dice bench report`: options and defaults; the work is
// dice::generation::run_bench / report_bench.

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "backend_options.h"
#include "commands.h"
#include "decoding_options.h"
#include "defaults.h"
#include "dice/core/error.h"
#include "dice/core/signals.h"
#include "dice/generation/bench.h"
#include "dice/generation/bench_store.h"
#include "dice/generation/endpoint.h"
#include "dice/generation/prompts.h"
#include "dice/model/checkpoint.h"
#include "dice/tokenizer/tokenizer.h"
#include "rule_options.h"

namespace dice::cli {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

/// What builds the generator; stored with the run so that --resume rebuilds the same one.
struct GeneratorArgs {
  std::string model;
  std::string tokenizer;
  BackendArgs backend;
  DecodingArgs decoding;  ///< its seed is the run's (BenchOptions::seed), stored there
  std::string endpoint;
  std::string endpoint_model;
  std::string api_key_env;
  int concurrency = 8;
  int retries = 4;

  json to_json() const {
    json j = {{"model", model},
              {"tokenizer", tokenizer},
              {"backend", backend.backend},
              {"threads", backend.threads},
              {"gpu_memory", backend.gpu_memory},
              {"cuda_dtype", backend.dtype},
              {"cuda_attention", backend.attention},
              {"cuda_graphs", !backend.no_cuda_graphs},
              {"endpoint", endpoint},
              {"endpoint_model", endpoint_model},
              {"api_key_env", api_key_env},
              {"concurrency", concurrency},
              {"retries", retries}};
    j.update(decoding.to_json());
    return j;
  }
  void from_json(const json& j) {
    model = j.value("model", model);
    tokenizer = j.value("tokenizer", tokenizer);
    backend.backend = j.value("backend", backend.backend);
    backend.threads = j.value("threads", backend.threads);
    backend.gpu_memory = j.value("gpu_memory", backend.gpu_memory);
    backend.dtype = j.value("cuda_dtype", backend.dtype);
    backend.attention = j.value("cuda_attention", backend.attention);
    backend.no_cuda_graphs = !j.value("cuda_graphs", !backend.no_cuda_graphs);
    decoding.from_json(j);
    endpoint = j.value("endpoint", endpoint);
    endpoint_model = j.value("endpoint_model", endpoint_model);
    api_key_env = j.value("api_key_env", api_key_env);
    concurrency = j.value("concurrency", concurrency);
    retries = j.value("retries", retries);
  }
};

struct BenchArgs {
  generation::BenchOptions bench;
  GeneratorArgs generator;
  std::string progress = "auto";
};

/// The engine generator with the model and tokenizer it uses.
class ModelGenerator final : public generation::Generator {
 public:
  explicit ModelGenerator(const GeneratorArgs& args)
      : tokenizer_(tokenizer::Tokenizer::load(args.tokenizer.empty() ? default_tokenizer(args.model)
                                                                     : args.tokenizer)) {
    generation::EngineGeneratorOptions options;
    options.chat_template = !args.decoding.no_chat_template;
    options.enable_thinking = args.decoding.enable_thinking;
    options.schedule = args.decoding.schedule();
    std::string description;
    {
      const auto checkpoint = model::Checkpoint::open(args.model);  // unmapped after the copy
      options.generation =
          resolve(args.decoding, checkpoint.config().mask_token_id, tokenizer_.vocab_size());
      backend_ = make_backend(args.backend, checkpoint, &description);
    }
    engine_ = std::make_unique<generation::EngineGenerator>(
        *backend_, tokenizer_, std::move(options),
        fmt::format("engine: {} ({})", args.model, description));
  }
  void generate(std::span<const generation::SampleRequest> requests,
                const generation::SampleCallback& done) override {
    engine_->generate(requests, done);
  }
  std::string describe() const override { return engine_->describe(); }

 private:
  tokenizer::Tokenizer tokenizer_;
  std::unique_ptr<engine::Backend> backend_;
  std::unique_ptr<generation::EngineGenerator> engine_;
};

std::unique_ptr<generation::Generator> make_generator(const GeneratorArgs& args) {
  if (!args.endpoint.empty()) {
    generation::EndpointOptions o;
    o.url = args.endpoint;
    o.model = args.endpoint_model;
    if (!args.api_key_env.empty()) {
      const char* key = std::getenv(args.api_key_env.c_str());
      if (key == nullptr || *key == '\0')
        throw InputError("--api-key-env " + args.api_key_env + ": the variable is not set");
      o.api_key = key;
    }
    o.concurrency = args.concurrency;
    o.retries = args.retries;
    o.max_tokens = args.decoding.options.max_new_tokens;
    o.temperature = args.decoding.options.sampling.temperature;
    o.top_p = args.decoding.options.sampling.top_p;
    return std::make_unique<generation::EndpointGenerator>(o);
  }
  if (args.model.empty()) throw InputError("give --model DIR or --endpoint URL");
  return std::make_unique<ModelGenerator>(args);
}

void print_result(const generation::BenchRun& run, const fs::path& out) {
  std::cout << "\n" << generation::report_markdown(run.report);
  if (!run.device_note.empty()) std::cout << "\nnote: " << run.device_note << "\n";
  std::cout << "\nreport: " << (out / "report.html").string()
            << "\nsummary: " << (out / "report.md").string()
            << "\nstore: " << (out / "bench.db").string() << "\n";
}

}  // namespace

void add_bench_command(CLI::App& app) {
  auto args = std::make_shared<BenchArgs>();
  auto& b = args->bench;
  auto& g = args->generator;
  auto* cmd = app.add_subcommand(
      "bench", "generate kernels for a problem set with a model, verify and time them, report");
  cmd->add_option("--model", g.model, "model folder (config.json + safetensors)");
  cmd->add_option("--tokenizer", g.tokenizer,
                  "tokenizer folder (default: the model folder if it has one, else "
                  "../shared/models/sdar/tokenizer)");
  b.problems = "kernelbench:L1,L2,L3";
  cmd->add_option("--problems", b.problems,
                  "e2e: problems (kernelbench:L1,L2,L3, kernelbench:L2/17, a .py, a folder, a "
                  ".jsonl; join with +)")
      ->capture_default_str();
  cmd->add_option("--mode", b.mode, "e2e (KernelBench one-shot) or infill (BiC-RL stage 1)")
      ->capture_default_str();
  b.infill_jsonl = shared_path("data/dice/infilling_eval_99.jsonl");
  cmd->add_option("--infill-data", b.infill_jsonl,
                  "infill: records {id, pytorch_code, prefix, "
                  "middle, suffix}")
      ->capture_default_str();
  cmd->add_flag("--oracle-middle", b.oracle_middle,
                "infill: substitute the true middle for the model's output (self-check)");
  cmd->add_option("--limit", b.limit, "only the first N problems (0: all)")->capture_default_str();
  cmd->add_option("-k,--samples", b.samples, "samples per problem (K)")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  b.prompt_dir = generation::default_prompt_dir();
  cmd->add_option("--prompt-dir", b.prompt_dir,
                  "folder of kernelbench_oneshot.txt and kernel_infilling.txt")
      ->capture_default_str();
  b.eval.out_dir = "out/bench";
  cmd->add_option("-o,--out", b.eval.out_dir, "bench.db, eval/, report.html, report.md")
      ->capture_default_str();
  cmd->add_flag("--resume", b.resume,
                "continue the run stored in --out: only unfinished samples are generated or "
                "evaluated; problems, samples, generator and evaluation options come from the "
                "store");
  cmd->add_flag("--no-eval", b.no_eval,
                "generate and store only; a later --resume evaluates what was generated");
  // decoding, as `dice generate`
  add_backend_options(cmd, g.backend);
  add_decoding_options(*cmd, g.decoding);
  // endpoint
  cmd->add_option("--endpoint", g.endpoint,
                  "an OpenAI-compatible server (http://host:port[/v1]) generates instead of "
                  "the engine");
  cmd->add_option("--endpoint-model", g.endpoint_model, "the \"model\" of each request");
  cmd->add_option("--api-key-env", g.api_key_env,
                  "environment variable holding the API key (sent as a Bearer token)");
  cmd->add_option("--concurrency", g.concurrency, "endpoint requests in flight")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--retries", g.retries,
                  "endpoint: more tries after 408/429/5xx/connection "
                  "errors (exponential backoff from 1 s)")
      ->capture_default_str()
      ->check(CLI::Range(0, 20));
  // evaluation, as `dice eval`
  auto& e = b.eval;
  e.kernelbench_jsonl = default_kernelbench();
  cmd->add_option("--kernelbench", e.kernelbench_jsonl,
                  "KernelBench problems as JSON Lines (env DICE_KERNELBENCH)")
      ->capture_default_str();
  e.cache_dir = env_or("DICE_CACHE", default_cache().string());
  cmd->add_option("--cache", e.cache_dir, "build cache folder (env DICE_CACHE)")
      ->capture_default_str();
  cmd->add_option("--device", e.device, "evaluation: auto, cuda, cpu or none (compile only)")
      ->capture_default_str();
  cmd->add_option("--gpus", e.gpus, "with cuda: how many GPUs (0 = all)")->capture_default_str();
  e.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("-j,--jobs", e.jobs, "parallel compiler processes")->capture_default_str();
  cmd->add_option("--arch", e.arch, "GPU architecture to build for")->capture_default_str();
  cmd->add_option("--protocol", e.protocol, "dice or kernelbench")->capture_default_str();
  add_rule_options(cmd, e);
  cmd->add_option("--correct-trials", e.correct_trials, "correctness trials")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timing-trials", e.timing_trials, "timed trials per model")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", e.warmup, "warm-up calls per model")->capture_default_str();
  cmd->add_option("--eval-seed", e.seed, "seed of models and inputs in evaluation")
      ->capture_default_str();
  cmd->add_flag("!--no-timing", e.measure_timing, "check correctness only");
  cmd->add_option_function<int>(
         "--timeout-compile", [&e](int s) { e.compile_timeout = std::chrono::seconds(s); },
         "s per compiler process")
      ->default_str("600");
  cmd->add_flag("--fresh-reference-timing", e.fresh_reference_timing,
                "time the reference with every candidate");
  e.python.python = default_python();
  cmd->add_option("--python", e.python.python, "Python interpreter with torch (env DICE_PYTHON)")
      ->capture_default_str();
  e.python.worker_path = default_worker_path();
  cmd->add_option("--progress", args->progress,
                  "auto (bars when stderr is a terminal, else lines), bar, lines or none")
      ->capture_default_str();

  auto report_out = std::make_shared<std::string>("out/bench");
  auto* report = cmd->add_subcommand(
      "report", "re-score and re-report a stored bench run (report.html, report.md)");
  report->add_option("-o,--out", *report_out, "the run's folder")->capture_default_str();
  report->callback([report_out] {
    const auto run = generation::report_bench(*report_out);
    print_result(run, *report_out);
  });

  cmd->callback([cmd, args] {
    if (cmd->got_subcommand("report")) return;
    auto& bench = args->bench;
    auto& gen = args->generator;
    bench.eval.progress =
        args->progress == "auto"
            ? (::isatty(STDERR_FILENO) ? eval::ProgressMode::kBar : eval::ProgressMode::kLines)
            : eval::parse_progress_mode(args->progress);
    if (bench.resume) {
      const fs::path db = bench.eval.out_dir / "bench.db";
      if (!fs::exists(db))
        throw InputError("--resume: " + db.string() + " does not exist (no run to continue)");
      const json stored = generation::BenchStore(db).options();
      if (stored.is_object() && stored.contains("generator")) gen.from_json(stored["generator"]);
    } else if (gen.endpoint.empty() && gen.model.empty() && !bench.oracle_middle) {
      throw InputError("give --model DIR, --endpoint URL, or (--mode infill) --oracle-middle");
    }
    resolve(gen.decoding);  // a bad --strategy or --stop-ids fails before anything is stored
    bench.seed = gen.decoding.options.sampling.seed;  // a resumed run keeps its stored seed
    bench.generator = gen.to_json();
    std::stop_source stop;
    const SignalStop signals(stop);
    const auto run = generation::run_bench(
        bench, [&gen] { return make_generator(gen); }, std::cerr, stop.get_token());
    if (run.interrupted) throw Interrupted(signals.signal());
    print_result(run, bench.eval.out_dir);
    if (run.generation_failures > 0)
      throw Error(
          fmt::format("{} samples failed to generate (see report.html; --resume retries "
                      "them)",
                      run.generation_failures));
  });
}

}  // namespace dice::cli
