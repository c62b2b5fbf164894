#include <catch2/catch.hpp>
#include <httplib.h>

#include <chrono>
#include <thread>

#include "user/net/listener.h"

using ember::net::Listener;

// Waits up to 10 s for the loop to end; past that, stops it with the
// server's own stop() (the loop runs by then), so that a failure is told
// instead of the test waiting for ever.
static bool ended_in_time(httplib::Server& server, const Listener& listener) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!listener.ended() && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  if (listener.ended()) return true;
  while (!listener.ended()) {
    server.stop();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_CASE("listener: a stop at any moment after start ends the loop") {
  // A stop in the instant after start, before the loop has begun, is the
  // case httplib's stop() alone misses (the fleet agent hung on it); a
  // stop a few milliseconds later, once it accepts, is the common case.
  for (int delay_us : {0, 0, 0, 50, 200, 2000}) {
    for (int i = 0; i < 40; ++i) {
      httplib::Server server;
      int port = server.bind_to_any_port("127.0.0.1");
      REQUIRE(port > 0);
      bool stopped_in_time = false;
      {
        Listener listener(server);
        if (delay_us) std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
        std::thread stopper([&] { listener.stop(); });
        stopped_in_time = ended_in_time(server, listener);
        stopper.join();
        CHECK_FALSE(listener.failed());
      }
      REQUIRE(stopped_in_time);
    }
  }
}

TEST_CASE("listener: it serves until stopped, and a second stop does nothing") {
  httplib::Server server;
  server.Get("/x", [](const httplib::Request&, httplib::Response& res) { res.set_content("y", "text/plain"); });
  int port = server.bind_to_any_port("127.0.0.1");
  REQUIRE(port > 0);
  Listener listener(server);
  httplib::Client client("127.0.0.1", port);
  auto r = client.Get("/x");
  REQUIRE(r);
  CHECK(r->body == "y");
  CHECK_FALSE(listener.ended());
  listener.stop();
  CHECK(listener.ended());
  CHECK_FALSE(listener.failed());
  listener.stop();
  CHECK_FALSE(client.Get("/x"));
}
