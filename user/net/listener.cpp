#include "user/net/listener.h"

#include <httplib.h>

#include <chrono>

namespace ember::net {

Listener::Listener(httplib::Server& server) : server_(server) {
  thread_ = std::thread([this] {
    listened_ = server_.listen_after_bind();
    ended_ = true;
  });
}

Listener::~Listener() { stop(); }

void Listener::stop() {
  if (!thread_.joinable()) return;
  // The loop sets is_running() as it begins and checks the socket stop()
  // closes before each accept, so once it runs, one stop() ends it.
  while (!server_.is_running() && !ended_) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  server_.stop();
  thread_.join();
}

}  // namespace ember::net
