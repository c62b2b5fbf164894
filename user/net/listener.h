// An HTTP server's accept loop on a thread of its own, for ember serve and
// the fleet agent's /metrics: it can be stopped at any moment after start,
// the first instant included.
#pragma once

#include <atomic>
#include <thread>

namespace httplib {
class Server;
}

namespace ember::net {

class Listener {
 public:
  // Runs listen_after_bind() of `server`, which is bound already and must
  // outlive the listener.
  explicit Listener(httplib::Server& server);
  ~Listener();  // stop()
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;

  // Ends the loop, whether it has begun yet or not, and waits for its
  // thread. cpp-httplib's own stop() does nothing until the loop has marked
  // itself running: alone, a stop right after start was lost and the join
  // waited for ever (ember agent stopped by a bad configuration, 11 runs of
  // 20 on a busy host).
  void stop();
  // The loop has returned: stopped, or failed by itself.
  bool ended() const { return ended_; }
  // It returned by itself (an accept error), not by stop().
  bool failed() const { return ended_ && !listened_; }

 private:
  httplib::Server& server_;
  std::atomic<bool> ended_ = false;
  std::atomic<bool> listened_ = false;  // listen_after_bind's answer
  std::thread thread_;
};

}  // namespace ember::net
