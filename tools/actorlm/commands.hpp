#pragma once
// Subcommands of the single `actorlm` binary. Each add_* registers its subcommands on `app`;
// their callbacks store the process exit code in `exit_code` (0 ok, 1 bad input, 2 usage).

#include <string_view>

namespace CLI { class App; }

namespace actorlm::tools {

extern const std::string_view embedded_default_config;  // configs/default.toml, built in

void add_config_command(CLI::App& app, int& exit_code);  // config check | config show
void add_bench_command(CLI::App& app, int& exit_code);   // bench kv

}  // namespace actorlm::tools
