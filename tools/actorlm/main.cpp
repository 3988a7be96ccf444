// actorlm: one binary, subcommands listed by --help.
#include "tools/actorlm/commands.hpp"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

int main(int argc, char** argv) {
  // Logs and progress go to stderr; stdout carries results (JSON, TOML) only.
  spdlog::set_default_logger(spdlog::stderr_color_mt("actorlm"));
  CLI::App app{"actorlm: an LLM serving runtime on the actor model", "actorlm"};
  app.set_version_flag("--version", "actorlm 0.1.0");
  app.require_subcommand(1);
  int exit_code = 0;
  actorlm::tools::add_config_command(app, exit_code);
  actorlm::tools::add_bench_command(app, exit_code);
  actorlm::tools::add_generate_command(app, exit_code);
  actorlm::tools::add_serve_command(app, exit_code);
  actorlm::tools::add_worker_command(app, exit_code);
  actorlm::tools::add_simulate_command(app, exit_code);
  actorlm::tools::add_plan_command(app, exit_code);
  actorlm::tools::add_calibrate_command(app, exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
