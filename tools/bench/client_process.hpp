#pragma once
// Benchmarks whose clients run in a process of their own, so that the server's process holds
// the server alone (its CPU time is the server's) and the two never share a heap or a lock.
// ClientProcess starts the child (by default this binary again: `actorlm bench load-client`,
// see load_commands.hpp) and talks to it in JSON lines: commands on its stdin, results on its
// stdout; its stderr is this process's. Plus the process figures the benchmarks print.

#include <nlohmann/json_fwd.hpp>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace actorlm::bench {

// This binary, re-executed as the load client (Linux: /proc/self/exe).
std::vector<std::string> default_client_command();

class ClientProcess {
 public:
  // Starts argv[0] with the arguments argv[1..]; throws std::runtime_error when it cannot.
  // Ignores SIGPIPE in this process from then on (a write to a dead child fails instead).
  explicit ClientProcess(const std::vector<std::string>& argv);
  // Closes the child's stdin (it exits at the end of its input), waits up to 5 s, then kills it.
  ~ClientProcess();
  ClientProcess(const ClientProcess&) = delete;
  ClientProcess& operator=(const ClientProcess&) = delete;

  int pid() const { return pid_; }
  void send(const nlohmann::json& command);
  // The child's next line, parsed. Throws std::runtime_error when none comes within `timeout`,
  // when the child has exited, or when the line is not JSON.
  nlohmann::json receive(std::chrono::milliseconds timeout);

 private:
  int pid_ = -1;
  int to_child_ = -1, from_child_ = -1;
  std::string pending_;  // read past the last line returned
};

// User plus system CPU time of this process so far (getrusage), in seconds.
double process_cpu_seconds();
// This process's resident memory now (VmRSS of /proc/self/status), in KiB; 0 if unknown.
std::uint64_t resident_kib();
// Raises this process's soft RLIMIT_NOFILE to its hard limit (thousands of sockets need it);
// returns the soft limit now.
std::uint64_t raise_open_files_limit();

}  // namespace actorlm::bench
