#pragma once

#include <optional>

#include <httplib.h>

namespace moelab::server {

// The TCP connection a request arrived on, to notice a client that left while its non-streaming
// answer is still being generated. cpp-httplib 0.11 (Debian 12's) gives a handler neither the
// socket nor Request::is_connection_closed (added in later versions), and writes nothing of a
// whole answer before it is complete, so no failed write says the client is gone; the socket is
// found by its address pair instead, which names one open connection.
class ClientConnection {
 public:
  // The socket whose local and peer addresses are the request's; nullopt when none matches (a
  // connection httplib has not exposed as a plain TCP socket).
  static std::optional<ClientConnection> Of(const httplib::Request& request);

  // True once the peer has closed its end (an orderly close reads as end of file) or reset it.
  // Bytes the client sent after its request (a pipelined next request) do not count as closed.
  bool Closed() const;

 private:
  explicit ClientConnection(int socket) : socket_(socket) {}
  int socket_;
};

}  // namespace moelab::server
