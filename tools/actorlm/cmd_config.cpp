// actorlm config check | show: validate a config file, or print its effective values.
#include "actors/config/config.hpp"
#include "actors/serving/backend.hpp"
#include "tools/actorlm/commands.hpp"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <string>

namespace actorlm::tools {
namespace {

constexpr std::string_view embedded_name = "<embedded default>";

struct Loaded {
  std::string name;  // how messages name the config
  config::ParseResult result;
};

Loaded load(const std::string& path) {
  if (path.empty()) {
    return {std::string(embedded_name), config::parse_config(embedded_default_config, embedded_name)};
  }
  return {path, config::load_config(path)};
}

// Every error on stderr, then a count; the exit code for bad input.
int report_errors(const Loaded& loaded) {
  for (const config::ConfigError& e : loaded.result.errors) std::cerr << e.to_string() << '\n';
  std::cerr << loaded.name << ": " << loaded.result.errors.size() << " error(s)\n";
  return 1;
}

// Registers `config NAME [FILE]`: loads FILE (or the embedded default), reports its errors, or
// runs `on_valid` on it.
void add_file_command(CLI::App& config, const char* name, const char* help, int& exit_code,
                      int (*on_valid)(const Loaded&)) {
  // CLI11 writes the option into storage that must outlive this function: the callback owns it.
  auto file = std::make_shared<std::string>();
  CLI::App* command = config.add_subcommand(name, help);
  command->add_option("file", *file, "TOML config file (default: the built-in configs/default.toml)");
  command->callback([file, &exit_code, on_valid] {
    const Loaded loaded = load(*file);
    if (!loaded.result.ok()) {
      exit_code = report_errors(loaded);
      return;
    }
    exit_code = on_valid(loaded);
  });
}

}  // namespace

std::optional<config::Config> load_config_or_report(const std::string& file) {
  Loaded loaded = load(file);
  if (!loaded.result.ok()) {
    report_errors(loaded);
    return std::nullopt;
  }
  return std::move(loaded.result.config);
}

void add_config_command(CLI::App& app, int& exit_code) {
  CLI::App* config = app.add_subcommand(
      "config", "Check a configuration file or print its effective values");
  config->require_subcommand(1);
  add_file_command(
      *config, "check", "Validate a config file; print every problem as FILE:LINE:COLUMN: KEY: MESSAGE",
      exit_code, [](const Loaded& loaded) {
        // The schema knows every backend name; this build may lack one (cuda without nvcc).
        const auto name = std::string(config::to_string(loaded.result.config.engine.backend));
        const auto built = serving::registered_backends();
        if (std::find(built.begin(), built.end(), name) == built.end()) {
          std::string known;
          for (const auto& b : built) known += (known.empty() ? "" : ", ") + b;
          std::cerr << loaded.name << ": engine.backend: \"" << name << "\" is not available in this build (built with: "
                    << known << ")\n";
          return 1;
        }
        std::cout << loaded.name << ": ok\n";
        return 0;
      });
  add_file_command(
      *config, "show", "Print the effective configuration of FILE as TOML, every default filled in",
      exit_code, [](const Loaded& loaded) {
        std::cout << config::to_toml(loaded.result.config);
        return 0;
      });
}

}  // namespace actorlm::tools
