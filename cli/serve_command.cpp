// `dice eval serve`: options of the HTTP service; the work is dice::eval::serve.

#include <fmt/format.h>

#include <iostream>
#include <memory>

#include "commands.h"
#include "dice/core/signals.h"
#include "dice/evaluator/service.h"

namespace dice::cli {

void add_serve_command(CLI::App& eval, std::shared_ptr<eval::EvalOptions> options) {
  auto service = std::make_shared<eval::ServiceOptions>();
  auto* cmd = eval.add_subcommand(
      "serve",
      "evaluate batches submitted over HTTP on 127.0.0.1 and stream verdicts back "
      "(evaluator/SERVICE.md); eval's options set the workers and a batch's defaults");
  cmd->fallthrough();  // eval's options may follow `serve`
  cmd->add_option("--port", service->port, "TCP port (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--host", service->host, "address to listen on (loopback by default)")
      ->capture_default_str();
  service->store_dir = "out/serve";
  cmd->add_option("--store", service->store_dir, "folder of the service's results.db and logs/")
      ->capture_default_str();
  cmd->add_option("--max-items", service->max_items, "candidates per batch at most")
      ->capture_default_str()
      ->check(CLI::Range(1, 10000000));
  cmd->callback([service, options] {
    service->base = *options;
    std::stop_source stop;
    const SignalStop signals(stop);
    eval::serve(*service, std::cerr, stop.get_token());
  });
}

}  // namespace dice::cli
