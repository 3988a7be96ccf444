#pragma once
// Subcommands of the single `actorlm` binary. Each add_* registers its subcommands on `app`;
// their callbacks store the process exit code in `exit_code` (0 ok, 1 bad input, 2 usage).

#include <optional>
#include <string>
#include <string_view>

namespace CLI { class App; }
namespace actorlm::config { struct Config; }

namespace actorlm::tools {

extern const std::string_view embedded_default_config;  // configs/default.toml, built in

void add_config_command(CLI::App& app, int& exit_code);  // config check | config show
void add_bench_command(CLI::App& app, int& exit_code);   // bench kv | scheduler | cpu
void add_generate_command(CLI::App& app, int& exit_code);  // generate
void add_serve_command(CLI::App& app, int& exit_code);     // serve
void add_worker_command(CLI::App& app, int& exit_code);    // worker (a cluster's shard host)
void add_simulate_command(CLI::App& app, int& exit_code);  // simulate (sim backend, virtual time)
void add_plan_command(CLI::App& app, int& exit_code);      // plan (capacity search)
void add_calibrate_command(CLI::App& app, int& exit_code); // calibrate (cpu step times -> sim hardware)
void add_bench_sim_command(CLI::App& bench, int& exit_code);  // bench sim (under `bench`)
void add_bench_serve_command(CLI::App& bench, int& exit_code);  // bench serve, load-client (under `bench`)
void add_bench_soak_command(CLI::App& bench, int& exit_code);   // bench soak (under `bench`)
void add_bench_client_command(CLI::App& bench, int& exit_code); // bench client (under `bench`)
void add_bench_fidelity_command(CLI::App& bench, int& exit_code); // bench fidelity (under `bench`)
void add_bench_cluster_command(CLI::App& bench, int& exit_code);  // bench cluster (under `bench`)

// Loads FILE (empty: the embedded default); on errors prints them all to stderr, returns nullopt.
std::optional<config::Config> load_config_or_report(const std::string& file);

}  // namespace actorlm::tools
