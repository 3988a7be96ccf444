#include "actors/http/client_socket.hpp"

#include <httplib.h>

#include <cstdlib>

#include <dirent.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

namespace actorlm::http {

namespace {

// Address and port as httplib writes them into Request (getnameinfo, numeric host).
bool endpoint(const sockaddr_storage& a, socklen_t len, std::string& host, int& port) {
  if (a.ss_family != AF_INET && a.ss_family != AF_INET6) return false;
  char buf[NI_MAXHOST];
  if (::getnameinfo(reinterpret_cast<const sockaddr*>(&a), len, buf, sizeof buf, nullptr, 0, NI_NUMERICHOST) != 0)
    return false;
  host = buf;
  port = a.ss_family == AF_INET ? ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port)
                                : ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port);
  return true;
}

bool is_connection(int fd, const httplib::Request& req) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  std::string host;
  int port = -1;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !endpoint(a, len, host, port) ||
      port != req.local_port)
    return false;
  len = sizeof a;
  if (::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0 || !endpoint(a, len, host, port)) return false;
  return port == req.remote_port && host == req.remote_addr;
}

}  // namespace

ClientSocket::ClientSocket(const httplib::Request& req) {
  if (req.remote_port < 0 || req.local_port < 0) return;
  // The open descriptors only (RLIMIT_NOFILE may be a million): a few hundred at most here.
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return;
  const int own = ::dirfd(dir);
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
    const int fd = std::atoi(e->d_name);
    if (fd != own && is_connection(fd, req)) {
      fd_ = fd;
      break;
    }
  }
  ::closedir(dir);
}

bool ClientSocket::connected() const {
  if (fd_ < 0) return true;
  pollfd p{fd_, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) <= 0) return true;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) == 0;
}

}  // namespace actorlm::http
