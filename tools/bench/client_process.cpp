#include "tools/bench/client_process.hpp"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace actorlm::bench {

namespace {

[[noreturn]] void fail(const std::string& what) {
  throw std::runtime_error("client process: " + what + ": " + std::strerror(errno));
}

}  // namespace

std::vector<std::string> default_client_command() { return {"/proc/self/exe", "bench", "load-client"}; }

ClientProcess::ClientProcess(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::runtime_error("client process: no command");
  ::signal(SIGPIPE, SIG_IGN);  // a child that died fails send() instead of killing this process
  int in[2], out[2];  // the child's stdin and stdout
  if (::pipe2(in, O_CLOEXEC) != 0) fail("pipe");
  if (::pipe2(out, O_CLOEXEC) != 0) fail("pipe");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], STDIN_FILENO);  // dup2 clears O_CLOEXEC
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  to_child_ = in[1];
  from_child_ = out[0];
  if (rc != 0) {
    errno = rc;
    ::close(to_child_);
    ::close(from_child_);
    fail("cannot start " + argv[0]);
  }
}

ClientProcess::~ClientProcess() {
  ::close(to_child_);
  ::close(from_child_);
  int status = 0;
  for (int i = 0; i < 50; ++i) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, &status, 0);
}

void ClientProcess::send(const nlohmann::json& command) {
  const std::string line = command.dump() + "\n";
  std::size_t done = 0;
  while (done < line.size()) {
    const auto n = ::write(to_child_, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) fail("writing to the client process");
    done += static_cast<std::size_t>(n);
  }
}

nlohmann::json ClientProcess::receive(std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    if (const auto nl = pending_.find('\n'); nl != std::string::npos) {
      const std::string line = pending_.substr(0, nl);
      pending_.erase(0, nl + 1);
      try {
        return nlohmann::json::parse(line);
      } catch (const nlohmann::json::exception& e) {
        throw std::runtime_error("client process: not a JSON line (" + std::string(e.what()) + "): " + line);
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("client process: no answer in " + std::to_string(timeout.count()) + " ms");
    pollfd p{from_child_, POLLIN, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (r < 0 && errno != EINTR) fail("poll");
    if (r <= 0) continue;
    char buf[65536];
    const auto n = ::read(from_child_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("reading from the client process");
    if (n == 0) throw std::runtime_error("client process: it exited (see its messages above)");
    pending_.append(buf, static_cast<std::size_t>(n));
  }
}

double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto s = [](const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; };
  return s(u.ru_utime) + s(u.ru_stime);
}

std::uint64_t resident_kib() {
  std::ifstream f("/proc/self/status");
  std::string key;
  while (f >> key) {
    if (key == "VmRSS:") {
      std::uint64_t kib = 0;
      f >> kib;
      return kib;
    }
    f.ignore(4096, '\n');
  }
  return 0;
}

std::uint64_t raise_open_files_limit() {
  rlimit lim{};
  if (::getrlimit(RLIMIT_NOFILE, &lim) != 0) return 0;
  if (lim.rlim_cur < lim.rlim_max) {
    lim.rlim_cur = lim.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &lim);
    ::getrlimit(RLIMIT_NOFILE, &lim);
  }
  return lim.rlim_cur;
}

}  // namespace actorlm::bench
