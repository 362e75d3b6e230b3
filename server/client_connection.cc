#include "server/client_connection.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <system_error>

namespace moelab::server {
namespace {

struct Endpoint {
  std::string address;
  int port = -1;
};

// The numeric host and port of a socket address, as httplib writes Request::remote_addr and
// local_addr (getnameinfo with NI_NUMERICHOST).
std::optional<Endpoint> EndpointOf(const sockaddr_storage& address, socklen_t length) {
  char host[NI_MAXHOST], service[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&address), length, host, sizeof host, service,
                  sizeof service, NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
    return std::nullopt;
  }
  return Endpoint{host, std::stoi(service)};
}

bool Matches(int fd, const httplib::Request& request) {
  sockaddr_storage local{}, peer{};
  socklen_t local_length = sizeof local, peer_length = sizeof peer;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_length) != 0) return false;
  if (local.ss_family != AF_INET && local.ss_family != AF_INET6) return false;
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &peer_length) != 0) return false;
  const std::optional<Endpoint> here = EndpointOf(local, local_length);
  const std::optional<Endpoint> there = EndpointOf(peer, peer_length);
  return here && there && here->port == request.local_port && there->port == request.remote_port &&
         here->address == request.local_addr && there->address == request.remote_addr;
}

}  // namespace

std::optional<ClientConnection> ClientConnection::Of(const httplib::Request& request) {
  if (request.remote_port < 0 || request.local_port < 0) return std::nullopt;
  // httplib keeps the socket open until the handler returns, so the descriptor found here stays
  // this connection's while the caller uses it.
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    if (Matches(fd, request)) return ClientConnection(fd);
  }
  return std::nullopt;
}

bool ClientConnection::Closed() const {
  pollfd watched{socket_, POLLIN, 0};
  if (poll(&watched, 1, 0) <= 0) return false;  // nothing to read: still there
  if (watched.revents & (POLLERR | POLLHUP | POLLNVAL)) return true;
  char byte;
  const ssize_t read = recv(socket_, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (read == 0) return true;  // end of file: the peer closed its end
  return read < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR;
}

}  // namespace moelab::server
