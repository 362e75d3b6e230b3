// The server's listening socket: the backlog it asks for is the one the kernel applies (Debian's
// compiled cpp-httplib listens with 5, and a burst of streams overflowed it), checked without an
// accept loop so the kernel's accept queue alone decides which connections complete.
#include "server/completion_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include <gtest/gtest.h>

#include "base/error.h"
#include "executor/serving_model.h"
#include "executor/weights.h"
#include "kernels/thread_pool.h"
#include "tests/executor/tiny_models.h"
#include "tests/support/error_of.h"

namespace moelab::server {
namespace {

scheduler::SchedulerConfig SmallScheduler() {
  scheduler::SchedulerConfig config;
  config.kv_blocks = 8;
  config.max_sequence_tokens = 64;
  return config;
}

struct TinyEngine {
  TinyEngine()
      : pool(1),
        engine(executor::MakeCpuServingModel(
                   executor::MakeSyntheticWeights(testing::TinyMixtral(), 17, pool), 1),
               SmallScheduler()) {}
  kernels::ThreadPool pool;
  executor::ServingEngine engine;
};

// Opens `count` non-blocking connections to 127.0.0.1:port at once and returns how many complete
// their handshake within wait_ms. Nobody accepts: the listener's accept queue (its backlog) holds
// the completed ones and the kernel drops the SYNs beyond it.
int ConnectionsCompleted(int port, int count, int wait_ms) {
  std::vector<int> sockets;
  sockets.reserve(count);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  for (int i = 0; i < count; ++i) {
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    EXPECT_GE(s, 0);
    ::connect(s, reinterpret_cast<const sockaddr*>(&address), sizeof(address));
    sockets.push_back(s);
  }
  int completed = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  std::vector<bool> done(sockets.size(), false);
  // Polled at least once after the deadline, so a stall of this process past it still sees the
  // handshakes that completed meanwhile.
  for (bool last = false; completed < count && !last;) {
    last = std::chrono::steady_clock::now() >= deadline;
    for (size_t i = 0; i < sockets.size(); ++i) {
      if (done[i]) continue;
      pollfd p{sockets[i], POLLOUT, 0};
      if (::poll(&p, 1, 0) == 1 && (p.revents & POLLOUT) != 0) {
        int error = 0;
        socklen_t length = sizeof(error);
        ::getsockopt(sockets[i], SOL_SOCKET, SO_ERROR, &error, &length);
        if (error == 0) ++completed;
        done[i] = true;
      }
    }
    if (!last) ::usleep(2000);
  }
  for (int s : sockets) ::close(s);
  return completed;
}

int BoundPort(TinyEngine& tiny, ServerOptions options, std::unique_ptr<CompletionServer>& server) {
  options.port = 0;
  server =
      std::make_unique<CompletionServer>(tiny.engine, ServedModel{"tiny", 37, 64, {}}, options);
  return server->Bind();
}

TEST(CompletionServer, ItsListenBacklogHoldsABurstOfConnections) {
  TinyEngine tiny;
  std::unique_ptr<CompletionServer> server;
  ServerOptions options;  // the default backlog
  const int port = BoundPort(tiny, options, server);
  ASSERT_GE(server->EffectiveListenBacklog(), 100) << "net.core.somaxconn is below 100 here";
  EXPECT_EQ(ConnectionsCompleted(port, 100, 3000), 100);
}

TEST(CompletionServer, ASmallBacklogDropsTheBurstBeyondIt) {
  // The check above can fail: with the backlog httplib alone gives (5), most of the burst waits.
  TinyEngine tiny;
  std::unique_ptr<CompletionServer> server;
  ServerOptions options;
  options.listen_backlog = 5;
  const int port = BoundPort(tiny, options, server);
  EXPECT_EQ(server->EffectiveListenBacklog(), 5);
  const int completed = ConnectionsCompleted(port, 100, 300);
  EXPECT_GE(completed, 5);
  EXPECT_LE(completed, 8);
}

TEST(CompletionServer, ABacklogOutOfRangeIsRefusedByItsOption) {
  ServerOptions options;
  options.listen_backlog = 0;
  EXPECT_NE(testing::ErrorOf([&] { options.Validate(); }).find("--listen-backlog must be in"),
            std::string::npos);
  options.listen_backlog = 70000;
  EXPECT_NE(testing::ErrorOf([&] { options.Validate(); }).find("[1, 65535], got 70000"),
            std::string::npos);
}

}  // namespace
}  // namespace moelab::server
