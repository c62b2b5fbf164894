// The fleet agent's HTTP, in one place (cpp-httplib is slow to compile):
// the client that sends the spool's periods to Pyroscope, and the server
// of /metrics.
//
// The client uses the push API (one request per period, as the spool keeps
// it), the older /ingest endpoint (one multipart request per series) or
// OTLP/HTTP (one export request of OpenTelemetry's profiles per period).
// It says what to do with a period next: done, try again later (network
// errors, 5xx, 408, 429; OTLP's rule for its receivers: 429, 502, 503,
// 504), or give up on it (any other answer: the server will refuse it
// again).
#pragma once

#include <chrono>
#include <expected>
#include <memory>
#include <ctime>
#include <optional>
#include <string>
#include <string_view>

#include "user/fleet/config.h"
#include "user/fleet/metrics.h"
#include "user/fleet/spool.h"
#include "user/net/address.h"
#include "user/net/listener.h"

namespace httplib {
class Client;
class Server;
}

namespace ember::fleet {

struct SendResult {
  enum class Next { Done, Retry, GiveUp };
  Next next = Next::Done;
  int status = 0;            // the HTTP status, 0 when none came
  std::string message;       // why not done: the server's message or the network error
  double retry_after_s = 0;  // the server's Retry-After, if it gave one
  uint64_t bytes_sent = 0;
  size_t series_taken = 0;  // /ingest: the period's series the server has taken, in order
};

class PyroscopeClient {
 public:
  // `config.url` must be set (the configuration checked it parses).
  PyroscopeClient(const AgentConfig& config);
  ~PyroscopeClient();
  // Sends a period (the spool's push request); by /ingest, a request per
  // series, from series `taken` on (those before it were taken already).
  SendResult send(const Spool::Entry& period, std::string_view body, size_t taken = 0);

 private:
  // POSTs `body` and reads the answer by Pyroscope's rules, or by OTLP's
  // (`otlp`: a gzipped body; its retry rule, partial success and errors).
  SendResult post(const std::string& path, std::string_view body, const std::string& content_type, bool otlp = false);
  SendResult push(std::string_view body);
  SendResult ingest(const Spool::Entry& period, std::string_view body, size_t taken);
  SendResult otlp(std::string_view body);

  AgentConfig::Server server_;
  net::Url url_;
  std::unique_ptr<httplib::Client> http_;
};

// GET /metrics (metrics_text) on its own thread, until destroyed.
class MetricsServer {
 public:
  static std::expected<std::unique_ptr<MetricsServer>, std::string> start(const std::string& listen,
                                                                          const AgentMetrics& metrics, Spool& spool);
  ~MetricsServer();

 private:
  MetricsServer();
  std::unique_ptr<httplib::Server> server_;
  std::unique_ptr<net::Listener> listener_;  // after server_: stopped first
};

// What a status code asks for (2xx done; 408, 429, 5xx again; else give up).
SendResult::Next next_for_status(int status);
// The same by OTLP's specification: again only on 429, 502, 503 and 504.
SendResult::Next next_for_otlp_status(int status);
// An OTLP export response's partial success: "" when the server took all,
// else how many profiles it rejected and why.
std::string otlp_partial_success(std::string_view body);
// The message of an OTLP error answer in protobuf (google.rpc.Status).
std::string otlp_status_message(std::string_view body);
// The message of an error answer: Connect's and Pyroscope's JSON
// {"code":..., "message": ...}, else the body's start.
std::string error_message(std::string_view body);
// A Retry-After header's wait in seconds from `now`: delay-seconds, or an
// HTTP date (RFC 9110); nothing if it is neither.
std::optional<double> parse_retry_after(std::string_view value, std::time_t now);

}  // namespace ember::fleet
