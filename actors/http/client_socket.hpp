#pragma once
// The socket of the connection an HTTP request came in on, so that a handler which holds its
// response back can notice a client that hangs up. A non-streamed completion needs this: its
// status (200, or 500 when the engine fails the request) is known only at the end, so nothing
// may be written before, not even a keep-alive blank. cpp-httplib 0.11 gives handlers no
// access to the socket; it is found among the process's open descriptors by the request's
// address pair (local and remote address and port), which identifies one TCP connection.

#include <string>

namespace httplib { struct Request; }

namespace actorlm::http {

class ClientSocket {
 public:
  explicit ClientSocket(const httplib::Request&);
  // False once the peer has closed or reset the connection (or when its socket was not found:
  // then true, as nothing can be told). Reads nothing: bytes the client sends stay for httplib.
  bool connected() const;
  bool found() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace actorlm::http
