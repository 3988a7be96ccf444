// Who a TLS listener refused, and why: the log line CAF 0.17 does not write.
//
// A worker with [cluster] TLS accepts heads through libcaf_openssl, whose handshake failures go
// only to CAF's logger, compiled out in Debian's build (CAF_LOG_LEVEL_QUIET): a head of another
// CA, one without a certificate, or a plaintext one would be refused in silence on the worker's
// side. libcaf_openssl calls SSL_accept through its PLT, so this executable's SSL_accept comes
// first: it calls OpenSSL's own (dlsym RTLD_NEXT), and when the handshake fails for good it logs
// the peer's address, OpenSSL's reason, the certificate check's verdict and the certificate's
// subject when one was sent (a peer that closes without sending a byte is no refusal: a debug
// line). The result and errno are returned as they were; the thread's OpenSSL error queue is
// cleared before the call (as OpenSSL asks before any TLS I/O call, so that SSL_get_error is
// reliable; CAF does not, and stale errors of an earlier connection would otherwise be reported
// as this one's) and only peeked after it, so CAF sees the same failure.
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <spdlog/spdlog.h>

#include <arpa/inet.h>
#include <dlfcn.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cerrno>
#include <string>

namespace {

std::string peer_address(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (fd < 0 || ::getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) return "an unknown peer";
  char host[INET6_ADDRSTRLEN] = {};
  unsigned port = 0;
  if (addr.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&addr);
    ::inet_ntop(AF_INET, &a->sin_addr, host, sizeof host);
    port = ntohs(a->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&addr);
    ::inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host);
    port = ntohs(a->sin6_port);
  }
  return std::string(host) + ":" + std::to_string(port);
}

std::string refusal_reason(SSL* ssl, int error) {
  std::string why;
  if (const unsigned long e = ERR_peek_last_error(); e != 0) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    why = buf;
    // Reasons from SSL_AD_REASON_OFFSET on are alerts the peer sent: with TLS 1.3 the listener's
    // certificate goes first, so a peer of another CA says no before sending its own.
    if (ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) >= SSL_AD_REASON_OFFSET)
      why += " (the peer's alert: it did not accept this side's certificate, or ended the handshake)";
  } else if (error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN) {
    why = "the peer closed the connection during the handshake (it may have refused this side's certificate)";
  } else {
    why = "SSL_get_error " + std::to_string(error);
  }
  const long verdict = SSL_get_verify_result(ssl);
  if (verdict != X509_V_OK) why += "; its certificate failed the check: " + std::string(X509_verify_cert_error_string(verdict));
  if (X509* cert = SSL_get1_peer_certificate(ssl)) {
    char subject[256] = {};
    X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
    why += std::string("; its certificate: ") + subject;
    X509_free(cert);
  } else if (verdict == X509_V_OK) {
    why += "; it sent no certificate";
  }
  return why;
}

// A peer that connected and closed without sending a byte (a TCP health check, a port scan, a
// client that gave up before its hello) was not refused: nothing of it was judged. Not worth a
// warning per probe.
bool closed_before_hello(SSL* ssl, int error) {
  BIO* in = SSL_get_rbio(ssl);
  if (in == nullptr || BIO_number_read(in) != 0) return false;
  // OpenSSL 3 reports the end of the stream as "unexpected eof while reading"; older ones, and
  // a reset, as a syscall error with nothing queued.
  const unsigned long e = ERR_peek_last_error();
  if (e == 0) return error == SSL_ERROR_SYSCALL || error == SSL_ERROR_ZERO_RETURN;
  return ERR_GET_LIB(e) == ERR_LIB_SSL && ERR_GET_REASON(e) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
}

// Per connection (in the SSL object's ex_data): the peer, taken at the first call while the
// socket is still connected, and whether its refusal was logged (CAF calls SSL_accept again after
// a failure).
struct Handshake {
  std::string peer;
  bool logged = false;
};

void free_handshake(void*, void* ptr, CRYPTO_EX_DATA*, int, long, void*) { delete static_cast<Handshake*>(ptr); }

// Null when OpenSSL has no ex_data slot to give (then nothing is logged).
Handshake* handshake_of(SSL* ssl) {
  static const int index = SSL_get_ex_new_index(0, nullptr, nullptr, nullptr, free_handshake);
  if (index < 0) return nullptr;
  auto* h = static_cast<Handshake*>(SSL_get_ex_data(ssl, index));
  if (h == nullptr) {
    h = new Handshake{peer_address(SSL_get_fd(ssl))};
    if (SSL_set_ex_data(ssl, index, h) != 1) {
      delete h;
      return nullptr;
    }
  }
  return h;
}

}  // namespace

extern "C" int SSL_accept(SSL* ssl) {
  using accept_fn = int (*)(SSL*);
  static const auto real = reinterpret_cast<accept_fn>(::dlsym(RTLD_NEXT, "SSL_accept"));
  if (real == nullptr) return -1;  // cannot happen while libssl is loaded; fail closed
  Handshake* h = nullptr;
  try {
    h = handshake_of(ssl);  // before the call: a refusing peer may close its end meanwhile
  } catch (...) {           // no memory: the handshake goes on unlogged
  }
  ERR_clear_error();
  const int ret = real(ssl);
  if (ret <= 0 && h != nullptr && !h->logged) {
    const int saved_errno = errno;
    const int error = SSL_get_error(ssl, ret);
    if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) {
      h->logged = true;
      try {
        if (closed_before_hello(ssl, error))
          spdlog::debug("TLS: {} closed the connection before sending anything (a port probe?)", h->peer);
        else
          spdlog::warn("TLS: refused a connection from {}: {}", h->peer, refusal_reason(ssl, error));
      } catch (...) {  // nothing may unwind into libcaf_openssl's C caller
      }
    }
    errno = saved_errno;
  }
  return ret;
}
