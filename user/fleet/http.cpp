#include "user/fleet/http.h"

#include <time.h>

#include <charconv>
#include <ctime>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "flamegraph/gzip.h"
#include "flamegraph/pprof.h"
#include "flamegraph/protobuf.h"
#include "user/fleet/otlp_export.h"
#include "user/fleet/pyroscope.h"

namespace ember::fleet {
namespace {

std::string url_encode(std::string_view s) {
  static const char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}

// /ingest's application name: SERVICE.TYPE{label=value,...}.
std::string ingest_name(const Series& s) {
  std::string service, type, labels;
  for (const Label& l : s.labels) {
    if (l.name == "service_name") service = l.value;
    else if (l.name == "__name__") type = l.value;
    else if (!l.name.starts_with("__")) labels += (labels.empty() ? "" : ",") + l.name + "=" + l.value;
  }
  return service + "." + type + "{" + labels + "}";
}

// /ingest's sample_type_config: how the server reads each sample type.
std::string sample_type_config(std::string_view pprof) {
  flamegraph::SampleTypes types;
  if (!flamegraph::decode_pprof(pprof, {}, &types)) return "{}";
  nlohmann::json config = nlohmann::json::object();
  for (const std::string& name : types.names) {
    auto p = flamegraph::decode_pprof(pprof, name);
    std::string unit = !p ? "samples" : p->unit == "ns" ? "nanoseconds" : p->unit;
    config[name] = {{"units", unit}, {"aggregation", "sum"}, {"display-name", name}, {"sampled", unit == "samples"}};
  }
  return config.dump();
}

// The Retry-After of an answer, 0 if none or unreadable.
double retry_after(const httplib::Response& res) {
  if (!res.has_header("Retry-After")) return 0;
  return parse_retry_after(res.get_header_value("Retry-After"), std::time(nullptr)).value_or(0);
}

}  // namespace

SendResult::Next next_for_status(int status) {
  if (status >= 200 && status < 300) return SendResult::Next::Done;
  if (status == 408 || status == 429 || status >= 500) return SendResult::Next::Retry;
  return SendResult::Next::GiveUp;
}

SendResult::Next next_for_otlp_status(int status) {
  if (status >= 200 && status < 300) return SendResult::Next::Done;
  if (status == 429 || status == 502 || status == 503 || status == 504) return SendResult::Next::Retry;
  return SendResult::Next::GiveUp;
}

std::string otlp_partial_success(std::string_view body) {
  // ExportProfilesServiceResponse { ExportProfilesPartialSuccess partial_success = 1; }
  // ExportProfilesPartialSuccess { int64 rejected_profiles = 1; string error_message = 2; }
  protobuf::Reader r(body);
  int f, w;
  uint64_t rejected = 0;
  std::string_view message;
  while (r.next(f, w)) {
    if (f != 1 || w != protobuf::kLen) {
      r.skip(w);
      continue;
    }
    protobuf::Reader p(r.bytes());
    while (p.next(f, w)) {
      if (f == 1 && w == protobuf::kVarint) rejected = p.varint();
      else if (f == 2 && w == protobuf::kLen) message = p.bytes();
      else p.skip(w);
    }
  }
  if (!rejected && message.empty()) return {};
  return std::to_string(rejected) + " profiles rejected" + (message.empty() ? "" : ": " + std::string(message));
}

std::string otlp_status_message(std::string_view body) {
  // google.rpc.Status { int32 code = 1; string message = 2; repeated Any details = 3; }
  protobuf::Reader r(body);
  int f, w;
  std::string message;
  while (r.next(f, w))
    if (f == 2 && w == protobuf::kLen) message = r.bytes();
    else r.skip(w);
  return r.ok() && !message.empty() ? message : "(no message)";
}

std::string error_message(std::string_view body) {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("message") && j["message"].is_string()) return j["message"].get<std::string>();
  std::string text(body.substr(0, 300));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  return text.empty() ? "(no message)" : text;
}

std::optional<double> parse_retry_after(std::string_view value, std::time_t now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  uint32_t seconds = 0;
  auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), seconds);
  if (!value.empty() && ec == std::errc() && end == value.data() + value.size()) return seconds;
  // IMF-fixdate, the form servers send: "Sun, 06 Nov 1994 08:49:37 GMT".
  std::tm tm{};
  std::string text(value);
  const char* rest = strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (!rest || *rest) return std::nullopt;
  std::time_t at = timegm(&tm);
  if (at == -1) return std::nullopt;
  return at > now ? static_cast<double>(at - now) : 0.0;
}

PyroscopeClient::PyroscopeClient(const AgentConfig& config) : server_(config.server) {
  url_ = *net::parse_url(server_.url);
  http_ = std::make_unique<httplib::Client>(url_.origin());
  auto timeout = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(server_.timeout_s));
  http_->set_connection_timeout(timeout);
  http_->set_read_timeout(timeout);
  http_->set_write_timeout(timeout);
  http_->set_keep_alive(true);
  if (url_.tls) {
    http_->enable_server_certificate_verification(true);
    if (!server_.ca_file.empty()) http_->set_ca_cert_path(server_.ca_file.c_str());
  }
  if (!config.server.user.empty()) http_->set_basic_auth(config.server.user.c_str(), config.password.c_str());
  if (!config.token.empty()) http_->set_bearer_token_auth(config.token.c_str());
  httplib::Headers headers;
  if (!server_.tenant.empty()) headers.emplace("X-Scope-OrgID", server_.tenant);
  headers.emplace("User-Agent", "ember-agent/0.1");
  http_->set_default_headers(headers);
}

PyroscopeClient::~PyroscopeClient() = default;

SendResult PyroscopeClient::post(const std::string& path, std::string_view body, const std::string& content_type,
                                 bool otlp) {
  SendResult r;
  httplib::Headers headers;
  if (otlp) headers.emplace("Content-Encoding", "gzip");
  auto res = http_->Post(url_.path + path, headers, body.data(), body.size(), content_type.c_str());
  if (!res) {
    r.next = SendResult::Next::Retry;
    r.message = httplib::to_string(res.error());
    return r;
  }
  r.status = res->status;
  r.next = otlp ? next_for_otlp_status(res->status) : next_for_status(res->status);
  r.bytes_sent = body.size();
  // OTLP's partial success is not tried again (the specification's rule),
  // but said; its errors may come as protobuf.
  if (r.next == SendResult::Next::Done)
    r.message = otlp ? otlp_partial_success(res->body) : "";
  else if (otlp && res->get_header_value("Content-Type").starts_with("application/x-protobuf"))
    r.message = otlp_status_message(res->body);
  else
    r.message = error_message(res->body);
  r.retry_after_s = retry_after(*res);
  return r;
}

SendResult PyroscopeClient::push(std::string_view body) {
  // Connect's unary protocol over HTTP/1.1: the message as the body.
  return post("/push.v1.PusherService/Push", body, "application/proto");
}

SendResult PyroscopeClient::ingest(const Spool::Entry& period, std::string_view body, size_t taken) {
  auto series = decode_push_request(body);
  if (!series) return {SendResult::Next::GiveUp, 0, "the spool's file is corrupt: " + series.error(), 0, 0};
  SendResult total;
  uint64_t from = period.start_ns / 1'000'000'000;
  uint64_t until = (period.start_ns + period.duration_ms * 1'000'000) / 1'000'000'000;
  total.series_taken = taken;
  for (size_t i = taken; i < series->size(); ++i) {
    const Series& s = (*series)[i];
    std::string path = "/ingest?name=" + url_encode(ingest_name(s)) + "&from=" + std::to_string(from) +
                       "&until=" + std::to_string(std::max(until, from + 1));
    httplib::MultipartFormDataItems items = {
        {"profile", s.profile, "profile.pprof", "application/octet-stream"},
        {"sample_type_config", sample_type_config(s.profile), "sample_type_config.json", "application/json"},
    };
    auto res = http_->Post(url_.path + path, items);
    SendResult r;
    if (!res) {
      r.next = SendResult::Next::Retry;
      r.message = httplib::to_string(res.error());
    } else {
      r.status = res->status;
      r.next = next_for_status(res->status);
      if (r.next != SendResult::Next::Done) r.message = error_message(res->body);
      r.retry_after_s = retry_after(*res);
      r.bytes_sent = s.profile.size();
    }
    total.bytes_sent += r.bytes_sent;
    // A series sent twice is counted twice by /ingest: stop at the first
    // failure, for the retry to go on from it.
    if (r.next != SendResult::Next::Done) {
      r.bytes_sent = total.bytes_sent;
      r.series_taken = total.series_taken;
      return r;
    }
    total.status = r.status;
    ++total.series_taken;
  }
  return total;
}

SendResult PyroscopeClient::otlp(std::string_view body) {
  auto request = otlp_export_request(body);
  if (!request) return {SendResult::Next::GiveUp, 0, "the spool's file is corrupt: " + request.error(), 0, 0};
  return post("/v1development/profiles", flamegraph::gzip(*request), "application/x-protobuf", true);
}

MetricsServer::MetricsServer() : server_(std::make_unique<httplib::Server>()) {}

std::expected<std::unique_ptr<MetricsServer>, std::string> MetricsServer::start(const std::string& listen,
                                                                                const AgentMetrics& metrics,
                                                                                Spool& spool) {
  auto endpoint = net::parse_listen(listen);
  if (!endpoint) return std::unexpected("metrics.listen: " + endpoint.error());
  std::unique_ptr<MetricsServer> s(new MetricsServer);
  s->server_->Get("/metrics", [&metrics, &spool](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics_text(metrics, spool.counts()), "text/plain; version=0.0.4; charset=utf-8");
  });
  if (!s->server_->bind_to_port(endpoint->host, endpoint->port))
    return std::unexpected("metrics.listen: cannot listen on " + listen + ": " + std::strerror(errno) +
                           "; give a free ADDRESS:PORT, or \"\" for no /metrics");
  s->listener_ = std::make_unique<net::Listener>(*s->server_);
  return s;
}

MetricsServer::~MetricsServer() = default;

SendResult PyroscopeClient::send(const Spool::Entry& period, std::string_view body, size_t taken) {
  if (server_.api == "ingest") return ingest(period, body, taken);
  return server_.api == "otlp" ? otlp(body) : push(body);
}

}  // namespace ember::fleet
