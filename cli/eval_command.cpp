// `dice eval`: options and defaults; the work is dice::eval::run_eval.

#include <fmt/format.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "commands.h"
#include "defaults.h"
#include "dice/core/signals.h"
#include "dice/evaluator/evaluate.h"
#include "rule_options.h"

namespace dice::cli {

namespace fs = std::filesystem;

void add_eval_command(CLI::App& app) {
  auto options = std::make_shared<eval::EvalOptions>();
  auto* cmd = app.add_subcommand("eval", "compile, verify and time candidate kernels");
  cmd->add_option("problems", options->problems,
                  "problems: a .py file, a folder, kernelbench:L1[,L2/17...], or a .jsonl; join "
                  "several with +");
  cmd->add_option("--problems", options->problems, "same as the positional argument");
  cmd->add_option("-c,--candidates", options->candidates,
                  "candidates: a file (.py, or raw model output .txt/.md), a folder matched by "
                  "file stem (<problem>[__tag]), or a .jsonl of {problem, candidate} records or "
                  "DICE pairs {id, pytorch_code, cuda_code}");
  cmd->add_flag("--reference-as-candidate", options->reference_as_candidate,
                "also evaluate each problem's own Model as its candidate (timing noise floor)");
  options->kernelbench_jsonl = default_kernelbench();
  cmd->add_option("--kernelbench", options->kernelbench_jsonl,
                  "KernelBench problems as JSON Lines (for kernelbench:...; env DICE_KERNELBENCH)")
      ->capture_default_str();
  options->out_dir = "out/eval";
  cmd->add_option("-o,--out-dir", options->out_dir,
                  "where records.jsonl, summary.json, summary.md and logs/ go")
      ->capture_default_str();
  options->cache_dir = env_or("DICE_CACHE", default_cache().string());
  cmd->add_option("--cache", options->cache_dir, "build cache folder (env DICE_CACHE)")
      ->capture_default_str();
  cmd->add_option("--device", options->device, "auto, cuda, cpu or none (compile only)")
      ->capture_default_str();
  cmd->add_option("--gpus", options->gpus,
                  "with cuda: how many GPUs (0 = all); with cpu: how many CPU workers")
      ->capture_default_str();
  options->jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("-j,--jobs", options->jobs, "parallel compiler processes")->capture_default_str();
  cmd->add_option("--arch", options->arch, "GPU architecture to build for (sm_90, sm_90a, ...)")
      ->capture_default_str();
  cmd->add_option("--protocol", options->protocol,
                  "dice (default) or kernelbench (KernelBench's own procedure)")
      ->capture_default_str();
  cmd->add_option("--correct-trials", options->correct_trials, "correctness trials")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--timing-trials", options->timing_trials, "timed trials per model")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  cmd->add_option("--warmup", options->warmup, "warm-up calls per model")
      ->capture_default_str()
      ->check(CLI::Range(0, 100000));
  cmd->add_option("--seed", options->seed, "seed of models and inputs")->capture_default_str();
  cmd->add_flag("!--no-timing", options->measure_timing, "check correctness only");
  auto seconds = [&](const char* name, std::chrono::seconds& value, const char* what) {
    cmd->add_option_function<int>(
           name, [&value](int s) { value = std::chrono::seconds(s); }, what)
        ->default_str(std::to_string(value.count()))
        ->check(CLI::Range(1, 86400));
  };
  seconds("--timeout-capture", options->capture_timeout, "s to load a candidate module on the CPU");
  seconds("--timeout-compile", options->compile_timeout, "s per compiler process");
  seconds("--timeout-load", options->stages.load, "s to load problem and candidate on the worker");
  seconds("--timeout-correctness", options->stages.correctness, "s for the correctness trials");
  seconds("--timeout-timing", options->stages.timing, "s for the timing trials");
  add_rule_options(cmd, *options);
  cmd->add_flag("--static-only", options->static_only,
                "stop after capture and the static rules (nothing is built or run)");
  cmd->add_option("--sandbox", options->sandbox.mode,
                  "isolation of model-written code: auto (bubblewrap when it works), bwrap "
                  "(required), none")
      ->capture_default_str();
  options->sandbox.bwrap = env_or("DICE_BWRAP", "bwrap");
  cmd->add_option("--bwrap", options->sandbox.bwrap, "the bubblewrap program (env DICE_BWRAP)")
      ->capture_default_str();
  cmd->add_option_function<double>(
         "--memory-limit",
         [options](double gib) {
           options->sandbox.worker_memory_bytes = static_cast<std::size_t>(gib * double(1 << 30));
         },
         "GiB of host memory a worker's processes may hold (default 60% of RAM over the workers)")
      ->check(CLI::Range(0.1, 1e6));
  cmd->add_option("--max-tasks", options->sandbox.max_tasks,
                  "processes + threads one sandboxed process tree may have")
      ->capture_default_str()
      ->check(CLI::Range(16, 1000000));
  options->python.python = default_python();
  cmd->add_option("--python", options->python.python,
                  "Python interpreter with torch (env DICE_PYTHON)")
      ->capture_default_str();
  options->python.worker_path = default_worker_path();
  cmd->add_flag("--resume", options->resume,
                "continue the run stored in --out-dir (results.db): only unfinished candidates "
                "are evaluated; inputs and result options come from the store");
  cmd->add_flag("--fresh-reference-timing", options->fresh_reference_timing,
                "time the reference with every candidate instead of reusing its stored timing");
  cmd->add_flag("!--no-pch", options->pch, "compile main.cpp without a precompiled header");
  cmd->add_flag("!--no-slim-header", options->slim_headers,
                "compile main.cpp and cuda.cu only with torch's headers, not first with dice's "
                "slim headers (dice_torch_main.h, dice_torch_cuda.h)");
  cmd->add_option("--main-compiler", options->main_compiler,
                  "compiler of main.cpp: auto (clang++ if present), cxx, or a program")
      ->capture_default_str();
  auto progress_mode = std::make_shared<std::string>("auto");
  cmd->add_option("--progress", *progress_mode,
                  "auto (a bar when stderr is a terminal, else lines), bar, lines or none")
      ->capture_default_str();
  add_serve_command(*cmd, options);

  cmd->callback([cmd, options, progress_mode] {
    if (cmd->got_subcommand("serve")) return;
    if (options->problems.empty() && options->candidates.empty() && !options->resume)
      throw CLI::ValidationError("dice eval", "give problems (and --candidates), or --resume");
    options->progress =
        *progress_mode == "auto"
            ? (::isatty(STDERR_FILENO) ? eval::ProgressMode::kBar : eval::ProgressMode::kLines)
            : eval::parse_progress_mode(*progress_mode);
    std::stop_source stop;
    const SignalStop signals(stop);
    const eval::EvalRun run = eval::run_eval(*options, std::cerr, stop.get_token());
    if (run.interrupted) throw Interrupted(signals.signal());
    std::cout << "\n" << eval::to_markdown(run.summary);
    if (!run.device_note.empty()) std::cout << "\nnote: " << run.device_note << "\n";
    std::cout << "\nrecords: " << (options->out_dir / "records.jsonl").string()
              << "\nsummary: " << (options->out_dir / "summary.md").string() << "\n";
  });
}

}  // namespace dice::cli
