#include "user/serve/serve.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>

#include <httplib.h>
#include <nlohmann/json.hpp>

#include "flamegraph/folded.h"
#include "flamegraph/html.h"
#include "flamegraph/output.h"
#include "flamegraph/pprof.h"
#include "user/fleet/spool_profile.h"
#include "user/java/java_attach.h"
#include "user/serve/recorder.h"
#include "user/serve/results.h"
#include "user/net/address.h"
#include "user/net/listener.h"

extern "C" const char ember_serve_html[];
extern "C" const char ember_serve_html_end[];

namespace ember {

using json = nlohmann::json;

std::string default_results_dir() {
  if (::geteuid() == 0) return "/var/lib/ember/results";
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state == '/')
    return std::string(state) + "/ember/results";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.local/state/ember/results";
}

namespace serve {

std::string request_token(std::string_view authorization, std::string_view cookie) {
  if (authorization.starts_with("Bearer ")) return std::string(authorization.substr(7));
  // "a=b; ember_token=T; c=d"
  for (size_t at = 0; at < cookie.size();) {
    size_t end = cookie.find(';', at);
    std::string_view part = cookie.substr(at, end == std::string_view::npos ? std::string_view::npos : end - at);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    if (part.starts_with("ember_token=")) return std::string(part.substr(12));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  return "";
}

bool token_matches(std::string_view given, std::string_view expected) {
  if (expected.empty()) return false;
  unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(expected[i] ^ (i < given.size() ? given[i] : 0));
  return diff == 0;
}

std::optional<std::string> cross_site_refusal(std::string_view marker, std::string_view origin,
                                              std::string_view sec_fetch_site, std::string_view host, bool tls) {
  // A custom header cannot be sent cross-site without a CORS preflight,
  // which this server never grants.
  if (marker != "1") return "a request that changes something needs the header X-Ember-Request: 1";
  if (!origin.empty() && origin != (tls ? "https://" : "http://") + std::string(host))
    return "requests from " + std::string(origin) + " are not accepted";
  if (!sec_fetch_site.empty() && sec_fetch_site != "same-origin" && sec_fetch_site != "none")
    return "cross-site requests are not accepted";
  return std::nullopt;
}

std::expected<std::optional<std::string>, std::string> read_token(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return std::nullopt;
  if (fd < 0) return std::unexpected("cannot read the token file " + path + ": " + std::strerror(errno));
  struct stat st {};
  ::fstat(fd, &st);
  char buf[512];
  ssize_t n = ::read(fd, buf, sizeof buf);
  ::close(fd);
  if (st.st_mode & 077)
    return std::unexpected("the token file " + path + " is readable by other users: chmod 600 it");
  std::string token(buf, n > 0 ? n : 0);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.size() < 16) return std::unexpected("the token in " + path + " is shorter than 16 characters");
  return token;
}

std::expected<std::string, std::string> create_token(const std::string& path) {
  unsigned char raw[24];
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw))
    return std::unexpected(std::string("getrandom: ") + std::strerror(errno));
  std::string token;
  for (unsigned char c : raw) {
    char hex[3];
    std::snprintf(hex, sizeof hex, "%02x", c);
    token += hex;
  }
  int out = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (out < 0) return std::unexpected("cannot create the token file " + path + ": " + std::strerror(errno));
  std::string line = token + "\n";
  bool ok = ::write(out, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(out);
  if (!ok) return std::unexpected("cannot write the token file " + path);
  return token;
}

}  // namespace serve

namespace {

constexpr size_t kMaxBody = 64 * 1024;

// The defaults the page starts with and new flamegraphs open in, kept in
// settings.json in the results directory.
class Settings {
 public:
  explicit Settings(std::string path) : path_(std::move(path)) {
    std::ifstream in(path_);
    if (!in) return;
    json j = json::parse(in, nullptr, false);
    if (auto clean = serve::check_settings(j)) value_ = *clean;
  }
  json get() const {
    std::lock_guard g(mutex_);
    return value_;
  }
  std::string view_json() const {
    std::lock_guard g(mutex_);
    return value_.contains("view") ? value_["view"].dump() : "";
  }
  std::expected<json, std::string> set(const json& j) {
    auto clean = serve::check_settings(j);
    if (!clean) return std::unexpected(clean.error());
    std::lock_guard g(mutex_);
    if (auto w = flamegraph::write_atomically(path_, clean->dump(2) + "\n", flamegraph::FileFor::Ember); !w)
      return std::unexpected(w.error());
    value_ = *clean;
    return value_;
  }

 private:
  std::string path_;
  mutable std::mutex mutex_;
  json value_ = json::object();
};

void send_json(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Replace, not throw: errors quote request paths, which may be any bytes
  // ("/results/%c0%af" was a 500).
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void send_error(httplib::Response& res, int status, const std::string& message) {
  send_json(res, status, {{"error", message}});
}

// At most `limit` bytes of a file, NULs included (/proc/PID/cmdline
// separates the arguments with them).
std::string read_text(const std::string& path, size_t limit) {
  std::ifstream in(path, std::ios::binary);
  std::string s(limit, '\0');
  in.read(s.data(), static_cast<std::streamsize>(limit));
  s.resize(static_cast<size_t>(in.gcount()));
  return s;
}

// The processes a profile may target, JVMs first, then by name.
json list_targets() {
  std::vector<pid_t> jvms = java::find_jvms();
  std::set<pid_t> jvm_set(jvms.begin(), jvms.end());
  json out = json::array();
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  pid_t self = ::getpid();
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (*end || pid <= 0 || pid == self) continue;
    std::string proc = "/proc/" + std::string(e->d_name);
    std::string cmdline = read_text(proc + "/cmdline", 400);
    if (cmdline.empty()) continue;  // kernel threads: the whole host covers them
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    while (!cmdline.empty() && cmdline.back() == ' ') cmdline.pop_back();
    std::string comm = process_name(static_cast<uint32_t>(pid));
    struct stat st {};
    std::string user;
    if (::stat(proc.c_str(), &st) == 0) {
      struct passwd pw {}, *found = nullptr;
      char buf[1024];
      if (getpwuid_r(st.st_uid, &pw, buf, sizeof buf, &found) == 0 && found) user = found->pw_name;
      else user = std::to_string(st.st_uid);
    }
    out.push_back({{"pid", pid}, {"name", comm}, {"cmdline", cmdline}, {"user", user}, {"jvm", jvm_set.count(pid) > 0}});
  }
  ::closedir(d);
  std::sort(out.begin(), out.end(), [](const json& a, const json& b) {
    if (a["jvm"] != b["jvm"]) return a["jvm"].get<bool>();
    if (a["name"] != b["name"]) return a["name"].get<std::string>() < b["name"].get<std::string>();
    return a["pid"].get<long>() < b["pid"].get<long>();
  });
  return out;
}

json status_json(const RecorderStatus& s) {
  if (s.state == RecorderStatus::State::Idle) return {{"state", "idle"}};
  return {{"state", s.state == RecorderStatus::State::Running ? "running" : "stopping"},
          {"id", s.result.id},
          {"event", s.result.event},
          {"target", s.result.target},
          {"target_name", s.result.target_name},
          {"created", s.result.created_ms},
          {"elapsed", s.elapsed},
          {"samples", s.samples},
          {"lost", s.lost},
          {"duration", s.request.duration}};
}

std::string content_type_of(std::string_view name) {
  if (name.ends_with(".html")) return "text/html; charset=utf-8";
  if (name.ends_with(".pb.gz")) return "application/gzip";
  if (name.ends_with(".json")) return "application/json";
  return "text/plain; charset=utf-8";
}

// Serves an open file, streamed (flamegraphs reach tens of MiB).
void send_file(httplib::Response& res, int fd, const std::string& name) {
  struct stat st {};
  ::fstat(fd, &st);
  auto shared = std::make_shared<int>(fd);
  res.set_content_provider(
      static_cast<size_t>(st.st_size), content_type_of(name),
      [shared](size_t offset, size_t length, httplib::DataSink& sink) {
        char buf[65536];
        ssize_t n = ::pread(*shared, buf, std::min(length, sizeof buf), static_cast<off_t>(offset));
        if (n <= 0) return false;
        sink.write(buf, static_cast<size_t>(n));
        return true;
      },
      [shared](bool) { ::close(*shared); });
  // Profiles download; the flamegraph and the log open in the browser.
  if (name.ends_with(".pb.gz") || name.ends_with(".folded"))
    res.set_header("Content-Disposition", "attachment; filename=\"" + name + "\"");
}

json body_json(const std::string& body) {
  return body.empty() ? json::object() : json::parse(body, nullptr, false);
}

using PostHandler = std::function<void(const httplib::Request&, const std::string& body, httplib::Response&)>;
using PostRoute = std::function<void(const std::string& pattern, PostHandler handler)>;

// The routes of a results directory: profiles started, stopped, listed,
// opened, compared and deleted, and the settings.
void add_result_routes(httplib::Server& svr, const PostRoute& post_route, const ResultStore& store,
                       Recorder& recorder, Settings& settings) {
  svr.Get("/api/targets", [](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, {{"processes", list_targets()}});
  });
  svr.Get("/api/status", [&](const httplib::Request&, httplib::Response& res) {
    send_json(res, 200, status_json(recorder.status()));
  });
  post_route("/api/start", [&](const httplib::Request& req, const std::string& text, httplib::Response& res) {
    auto request = serve::parse_start_request(text, settings.get());
    if (!request) return send_error(res, 400, request.error());
    auto started = recorder.start(*request);
    if (!started) {
      int code = started.error().why == Recorder::StartError::Busy      ? 409
                 : started.error().why == Recorder::StartError::Invalid ? 400
                                                                        : 500;
      return send_error(res, code, started.error().message);
    }
    std::fprintf(stderr, "ember: started profile %s (%s, %s) for %s\n", started->c_str(), request->event.c_str(),
                 request->pid ? ("pid " + std::to_string(request->pid)).c_str() : "whole host", req.remote_addr.c_str());
    send_json(res, 202, {{"id", *started}});
  });
  post_route("/api/stop", [&](const httplib::Request&, const std::string&, httplib::Response& res) {
    std::string id = recorder.status().result.id;
    if (!recorder.request_stop()) return send_error(res, 409, "no profile is running");
    // Symbolizing a whole host can take a while; past this the client polls.
    // The listing's entry: the recorder's copy has no file sizes.
    if (auto result = recorder.wait_result(id, 60)) return send_json(res, 200, to_json(store.find(id).value_or(*result)));
    send_json(res, 202, {{"id", id}, {"state", "stopping"}});
  });
  svr.Get("/api/results", [&](const httplib::Request&, httplib::Response& res) {
    json list = json::array();
    for (const ResultInfo& r : store.list()) list.push_back(to_json(r));
    send_json(res, 200, {{"results", list}});
  });
  post_route("/api/results/delete-all", [&](const httplib::Request&, const std::string& text, httplib::Response& res) {
    json body = body_json(text);
    // `== true`, not value(): {"confirm": "yes"} must be a 400, not a type error (500).
    if (body.is_discarded() || !body.is_object() || !body.contains("confirm") || body["confirm"] != true)
      return send_error(res, 400, "deleting every result needs {\"confirm\": true}");
    std::string running = recorder.status().result.id;
    size_t deleted = 0;
    for (const ResultInfo& r : store.list())
      if (r.id != running && store.remove(r.id)) ++deleted;
    send_json(res, 200, {{"deleted", deleted}});
  });
  post_route(R"(/api/results/([0-9a-f]{8})/delete)", [&](const httplib::Request& req, const std::string&,
                                                         httplib::Response& res) {
    std::string id = req.matches[1];
    if (id == recorder.status().result.id) return send_error(res, 409, "this profile is running: stop it first");
    size_t deleted = store.remove(id);
    if (!deleted) return send_error(res, 404, "no result " + id);
    send_json(res, 200, {{"deleted", deleted}});
  });
  svr.Get("/api/settings", [&](const httplib::Request&, httplib::Response& res) { send_json(res, 200, settings.get()); });
  post_route("/api/settings", [&](const httplib::Request&, const std::string& text, httplib::Response& res) {
    json body = body_json(text);
    if (body.is_discarded()) return send_error(res, 400, "the body is not JSON");
    auto saved = settings.set(body);
    if (!saved) return send_error(res, 400, saved.error());
    send_json(res, 200, *saved);
  });
  svr.Get(R"(/results/([^/]+))", [&](const httplib::Request& req, httplib::Response& res) {
    std::string name = req.matches[1];
    auto fd = store.open_file(name);
    if (!fd) return send_error(res, 404, "no result file " + name);
    send_file(res, *fd, name);
  });
  svr.Get("/diff", [&](const httplib::Request& req, httplib::Response& res) {
    auto base = store.find(req.get_param_value("base"));
    auto now = store.find(req.get_param_value("new"));
    if (!base || !now) return send_error(res, 404, "give two results: /diff?base=ID&new=ID");
    // Through open_file, as /results/ is: a link out of the directory or a
    // FIFO named like a result is no profile (read_profile follows links,
    // and blocks on a FIFO).
    auto read = [&](const ResultInfo& r) -> std::expected<flamegraph::Profile, std::string> {
      auto fd = store.open_file(r.base + ".pb.gz");
      if (!fd) return std::unexpected(std::strerror(fd.error()));
      std::string bytes;
      char buf[65536];
      for (ssize_t n; (n = ::read(*fd, buf, sizeof buf)) > 0;) bytes.append(buf, static_cast<size_t>(n));
      ::close(*fd);
      return flamegraph::decode_pprof(bytes);
    };
    auto before = read(*base);
    auto after = read(*now);
    if (!before || !after) return send_error(res, 404, "a result of the two has no profile");
    if (before->unit != after->unit)
      return send_error(res, 400, "the two results measure different things (" + before->unit + ", " +
                                      after->unit + ")");
    flamegraph::HtmlOptions html;
    html.title = "ember diff — " + base->base + " → " + now->base;
    html.base = &*before;
    html.label = now->base;
    html.base_label = base->base;
    html.view = settings.view_json();
    std::ostringstream page;
    flamegraph::write_html(*after, html, page);
    res.set_content(page.str(), "text/html; charset=utf-8");
  });
}

// A download's name: the service's name kept to letters, digits and ._-
std::string file_safe(std::string_view text) {
  std::string out;
  for (char c : text) out += std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_' ? c : '_';
  return out;
}

// The routes of a fleet agent's spool (`ember serve --dir SPOOL`): what it
// holds, and one service's profiles of one type over a time range, merged.
void add_spool_routes(httplib::Server& svr, const std::string& dir, Settings& settings) {
  auto catalog = std::make_shared<fleet::SpoolCatalog>(dir);
  auto catalog_mutex = std::make_shared<std::mutex>();
  auto ms = [](uint64_t ns) { return static_cast<int64_t>(ns / 1'000'000); };
  svr.Get("/api/spool", [=](const httplib::Request&, httplib::Response& res) {
    std::lock_guard lock(*catalog_mutex);
    auto contents = catalog->contents();
    if (!contents) return send_error(res, 500, contents.error());
    json series = json::array();
    for (const fleet::SpoolSeries& s : contents->series)
      series.push_back({{"service", s.service}, {"type", s.type}, {"periods", s.periods},
                        {"first", ms(s.first_ns)}, {"end", ms(s.end_ns)}});
    send_json(res, 200, {{"dir", dir}, {"periods", contents->periods}, {"pending", contents->pending},
                         {"sent", contents->sent}, {"rejected", contents->rejected}, {"bytes", contents->bytes},
                         {"first", ms(contents->first_ns)}, {"end", ms(contents->end_ns)}, {"series", series}});
  });
  svr.Get("/spool/profile", [dir, &settings](const httplib::Request& req, httplib::Response& res) {
    fleet::SpoolQuery q;
    q.service = req.get_param_value("service");
    q.type = req.get_param_value("type");
    if (q.service.empty() || q.type.empty()) return send_error(res, 400, "give service and type");
    for (auto [name, out] : {std::pair{"from", &q.from_ns}, std::pair{"to", &q.to_ns}}) {
      if (!req.has_param(name)) continue;
      const std::string text = req.get_param_value(name);
      uint64_t value = 0;
      auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc() || end != text.data() + text.size() || value > UINT64_MAX / 1'000'000)
        return send_error(res, 400, std::string(name) + ": give Unix time in milliseconds");
      *out = value * 1'000'000;
    }
    std::string format = req.has_param("format") ? req.get_param_value("format") : "html";
    if (format != "html" && format != "pprof" && format != "folded")
      return send_error(res, 400, "format: html, pprof or folded");
    auto profile = fleet::merge_spool(dir, q);
    if (!profile) return send_error(res, 404, profile.error());
    std::string name = file_safe(q.service) + "-" + file_safe(q.type);
    if (format == "pprof") {
      res.set_content(flamegraph::encode_pprof(*profile), "application/octet-stream");
      res.set_header("Content-Disposition", "attachment; filename=\"" + name + ".pb.gz\"");
    } else if (format == "folded") {
      res.set_content(flamegraph::folded_text(*profile), "text/plain; charset=utf-8");
      res.set_header("Content-Disposition", "attachment; filename=\"" + name + ".folded\"");
    } else {
      flamegraph::HtmlOptions html;
      html.title = "ember — " + q.service + " (" + q.type + ")";
      html.view = settings.view_json();
      std::ostringstream page;
      flamegraph::write_html(*profile, html, page);
      res.set_content(page.str(), "text/html; charset=utf-8");
    }
  });
}

}  // namespace

namespace serve {
namespace {

// The view's fields, each of its type.
std::expected<json, std::string> check_view(const json& v) {
  if (!v.is_object()) return std::unexpected("settings: view must be an object");
  json out = json::object();
  for (const auto& [key, x] : v.items()) {
    if (key == "reverse" || key == "icicle" || key == "normalise") {
      if (!x.is_boolean()) return std::unexpected("settings: view." + key + " must be true or false");
      out[key] = x;
    } else if (key == "sort") {
      if (x != "name" && x != "weight") return std::unexpected("settings: view.sort is \"name\" or \"weight\"");
      out[key] = x;
    } else if (key == "transforms") {
      if (!x.is_array() || x.size() > 64) return std::unexpected("settings: view.transforms must be a list (64 at most)");
      json list = json::array();
      for (const json& t : x) {
        if (!t.is_object() || !t.contains("kind") || !t["kind"].is_string() || !t.contains("re") ||
            !t["re"].is_string() || (t.contains("to") && !t["to"].is_string()))
          return std::unexpected("settings: a transform is {\"kind\": ..., \"re\": ..., \"to\": ...}");
        json clean = {{"kind", t["kind"]}, {"re", t["re"]}};
        if (t.contains("to")) clean["to"] = t["to"];
        list.push_back(clean);
      }
      out[key] = list;
    } else {
      return std::unexpected("settings: unknown view field '" + key + "'");
    }
  }
  return out;
}

}  // namespace

// Only known fields of the right types; the page's viewer checks the
// view's regexes again when it opens a graph.
std::expected<json, std::string> check_settings(const json& j) {
  if (!j.is_object()) return std::unexpected("settings must be a JSON object");
  json out = json::object();
  for (const auto& [key, v] : j.items()) {
    if (key == "event") {
      const auto& events = serve_events();
      if (!v.is_string() || std::find(events.begin(), events.end(), v.get<std::string>()) == events.end())
        return std::unexpected("settings: unknown event");
      out[key] = v;
    } else if (key == "frequency" || key == "interval") {
      if (!v.is_number_unsigned()) return std::unexpected("settings: " + key + " must be a positive integer");
      out[key] = v;
    } else if (key == "duration") {
      if (!v.is_number() || v.get<double>() < 0) return std::unexpected("settings: duration must be a number >= 0");
      out[key] = v;
    } else if (key == "min_block") {
      if (!v.is_string() || v.get<std::string>().size() > 32) return std::unexpected("settings: min_block must be text");
      out[key] = v;
    } else if (key == "view") {
      auto view = check_view(v);
      if (!view) return std::unexpected(view.error());
      out[key] = *view;
    } else {
      return std::unexpected("settings: unknown field '" + key + "'");
    }
  }
  return out;
}

std::expected<RecordRequest, std::string> parse_start_request(std::string_view text, const json& settings) {
  json body = text.empty() ? json::object() : json::parse(text, nullptr, false);
  if (body.is_discarded()) return std::unexpected("the body is not JSON");
  if (!body.is_object()) return std::unexpected("the body must be a JSON object");
  for (const auto& [key, v] : body.items())
    if (key != "event" && key != "pid" && key != "frequency" && key != "interval" && key != "min_block" &&
        key != "duration")
      return std::unexpected("unknown field '" + key + "'");
  json merged = settings;
  merged.erase("view");
  for (const auto& [key, v] : body.items()) merged[key] = v;
  RecordRequest r;
  try {
    r.event = merged.value("event", std::string("cpu"));
    if (merged.contains("pid")) {
      if (!merged["pid"].is_number_unsigned() || merged["pid"].get<uint64_t>() > 0x3fffffff)
        return std::unexpected("pid must be a process id");
      r.pid = merged["pid"].get<uint32_t>();
    }
    for (const char* key : {"frequency", "interval"})
      if (merged.contains(key) && !merged[key].is_number_unsigned())
        return std::unexpected(std::string(key) + " must be a positive integer");
    // Read whole, judged by check_request (check_frequency), not cut to 32 bits.
    r.frequency = merged.value("frequency", uint64_t{0});
    r.interval = merged.value("interval", uint64_t{0});
    r.min_block = merged.value("min_block", std::string());
    if (merged.contains("duration") && !merged["duration"].is_number())
      return std::unexpected("duration must be a number of seconds");
    r.duration = merged.value("duration", 0.0);
  } catch (const json::exception&) {
    return std::unexpected("event and min_block must be text");
  }
  if (auto ok = check_request(r); !ok) return std::unexpected(ok.error());
  return r;
}

}  // namespace serve

namespace {

// Every request first: security headers, the token (traded for a cookie
// from the link the server prints), and what a POST must be. `secret` is
// read at each request: a new one is made once the port is bound.
void guard_requests(httplib::Server& svr, const std::string& secret, const std::string& token_path, bool tls) {
  const std::string cookie_flags = std::string("; Path=/; HttpOnly; SameSite=Strict") + (tls ? "; Secure" : "");
  svr.set_pre_routing_handler([&secret, token_path, cookie_flags, tls](const httplib::Request& req,
                                                                       httplib::Response& res) {
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_header("X-Frame-Options", "DENY");
    res.set_header("Referrer-Policy", "no-referrer");
    res.set_header("Cache-Control", "no-store");
    // The link the server prints: trade the token for a cookie, and drop
    // it from the address bar and history.
    if (req.path == "/" && req.has_param("token")) {
      if (!serve::token_matches(req.get_param_value("token"), secret)) {
        send_error(res, 401, "wrong token");
        return httplib::Server::HandlerResponse::Handled;
      }
      res.set_header("Set-Cookie", "ember_token=" + secret + cookie_flags);
      res.set_redirect("/", 303);
      return httplib::Server::HandlerResponse::Handled;
    }
    // The page itself holds nothing secret: without the token it tells the
    // person how to sign in, where a bare 401 would show raw JSON.
    bool page = req.path == "/" && (req.method == "GET" || req.method == "HEAD");
    std::string given = serve::request_token(req.get_header_value("Authorization"), req.get_header_value("Cookie"));
    if (!page && !serve::token_matches(given, secret)) {
      res.set_header("WWW-Authenticate", "Bearer realm=\"ember\"");
      send_error(res, 401, "this server needs its access token: open the link `ember serve` printed, or send "
                           "Authorization: Bearer TOKEN (the token is in " + token_path + ")");
      return httplib::Server::HandlerResponse::Handled;
    }
    if (req.method != "GET" && req.method != "HEAD") {
      if (req.method != "POST") {
        send_error(res, 405, "only GET and POST are served");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (auto why = serve::cross_site_refusal(req.get_header_value("X-Ember-Request"), req.get_header_value("Origin"),
                                               req.get_header_value("Sec-Fetch-Site"), req.get_header_value("Host"), tls)) {
        send_error(res, 403, *why);
        return httplib::Server::HandlerResponse::Handled;
      }
      // cpp-httplib 0.11 holds only a body of a stated Content-Length to
      // set_payload_max_length: a chunked or a compressed one grows without
      // bound. Browsers and curl state the length of every body they send;
      // a request without a length has no body (see post_route).
      if (req.has_header("Transfer-Encoding")) {
        send_error(res, 411, "send the body with a Content-Length (64 KiB at most), not chunked");
        return httplib::Server::HandlerResponse::Handled;
      }
      if (std::string coding = req.get_header_value("Content-Encoding"); !coding.empty() && coding != "identity") {
        send_error(res, 415, "compressed bodies are not accepted");
        return httplib::Server::HandlerResponse::Handled;
      }
      // post_route reads bodies whole: cpp-httplib would parse a form and call for its parts.
      if (req.is_multipart_form_data()) {
        send_error(res, 415, "send the body as JSON, not as a multipart form");
        return httplib::Server::HandlerResponse::Handled;
      }
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
}

// The HTTP server (HTTPS with --tls-cert and --tls-key), its limits set.
std::expected<std::unique_ptr<httplib::Server>, std::string> make_server(const ServeOptions& o) {
  std::unique_ptr<httplib::Server> server;
  if (!o.tls_cert.empty()) {
    server = std::make_unique<httplib::SSLServer>(o.tls_cert.c_str(), o.tls_key.c_str());
    if (!server->is_valid()) return std::unexpected("--tls-cert/--tls-key: not a usable PEM certificate and key pair");
  } else {
    server = std::make_unique<httplib::Server>();
  }
  server->set_payload_max_length(kMaxBody);
  // cpp-httplib's default options set SO_REUSEPORT: a second server on the
  // port then listened too, and the kernel shared the connections between
  // the two (half the requests met the other's token). SO_REUSEADDR alone
  // refuses that, and still binds again past a stopped server's TIME_WAIT.
  server->set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  // A worker per connection (cpp-httplib): short timeouts and a pool
  // larger than the 50 listing clients the tests run, so idle or slow
  // connections hold workers briefly and a stop waiting for its result
  // leaves the others free.
  server->set_read_timeout(5);
  server->set_keep_alive_timeout(3);
  server->new_task_queue = [] { return new httplib::ThreadPool(64); };
  return server;
}

// Errors and exceptions, answered as JSON.
void answer_errors(httplib::Server& svr) {
  svr.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const char* why = res.status == 404   ? "not found"
                      : res.status == 413 ? "the request is too large (64 KiB at most)"
                      : res.status == 400 ? "bad request"
                                          : "request refused";
    send_error(res, res.status, why);
  });
  svr.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
    std::string what = "internal error";
    try {
      std::rethrow_exception(ep);
    } catch (const std::exception& e) {
      what += std::string(": ") + e.what();
    } catch (...) {
    }
    send_error(res, 500, what);
  });

}

}  // namespace

int run_serve(const ServeOptions& o) {
  auto fail = [](const std::string& message) {
    std::fprintf(stderr, "ember: %s\n", message.c_str());
    return 1;
  };
  auto endpoint = net::parse_listen(o.listen);
  if (!endpoint) return fail("--listen " + endpoint.error());
  // The results belong to the server, not to whoever started it with sudo
  // (flamegraph::invoking_user): its store stays its own, /var/lib/ember
  // root's, and a result written by its `ember record` children too.
  // Before any thread: the environment is not thread-safe.
  ::unsetenv("SUDO_UID");
  ::unsetenv("SUDO_GID");
  if (o.tls_cert.empty() != o.tls_key.empty()) return fail("--tls-cert and --tls-key go together");
  bool tls = !o.tls_cert.empty();
  for (const std::string& f : {o.tls_cert, o.tls_key})
    if (!f.empty() && ::access(f.c_str(), R_OK) != 0) return fail("cannot read " + f + ": " + std::strerror(errno));

  std::string dir = o.dir.empty() ? default_results_dir() : o.dir;
  // A fleet agent's spool is shown read-only: no profile is started here.
  bool spool = fleet::is_spool(dir);
  auto store = ResultStore::open(dir);
  if (!store) return fail(store.error());
  std::string token_path = o.token_file.empty() ? store->dir() + "/.token" : o.token_file;
  // Made only once the port is ours (below): a start that cannot listen
  // leaves none, so the next start still shows the new token's link.
  auto token = serve::read_token(token_path);
  if (!token) return fail(token.error());

  char exe[4096];
  ssize_t exe_len = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (exe_len <= 0) return fail("cannot find the ember binary (/proc/self/exe)");
  exe[exe_len] = '\0';

  Settings settings(store->dir() + "/settings.json");
  std::optional<Recorder> recorder;
  if (!spool) recorder.emplace(*store, exe, [&settings] { return settings.view_json(); });

  auto server = make_server(o);
  if (!server) return fail(server.error());
  httplib::Server& svr = **server;

  std::string secret = token->value_or("");
  guard_requests(svr, secret, token_path, tls);
  answer_errors(svr);

  // Each POST route reads its body itself, and only one of a stated
  // length: a request with neither Content-Length nor Transfer-Encoding
  // has no body (RFC 9112, 6.3), but cpp-httplib 0.11 reads one until the
  // client closes, so a bodiless `curl -X POST` waited for ever.
  auto post_route = [&svr](const std::string& pattern, PostHandler handler) {
    svr.Post(pattern, [handler = std::move(handler)](const httplib::Request& req, httplib::Response& res,
                                                     const httplib::ContentReader& read) {
      std::string body;
      auto append = [&body](const char* data, size_t size) {
        body.append(data, size);
        return true;
      };
      // On failure res.status says why (413 too large, 400), worded by the error handler.
      if (req.has_header("Content-Length") && !read(append)) return;
      handler(req, body, res);
    });
  };

  svr.Get("/", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(ember_serve_html, static_cast<size_t>(ember_serve_html_end - ember_serve_html),
                    "text/html; charset=utf-8");
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; "
                   "img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  });
  svr.Get("/api/info", [&](const httplib::Request&, httplib::Response& res) {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    send_json(res, 200, {{"version", "0.1"}, {"host", host}, {"kind", spool ? "spool" : "results"},
                         {"events", serve_events()}, {"dir", store->dir()}, {"settings", settings.get()}});
  });
  if (spool)
    add_spool_routes(svr, store->dir(), settings);
  else
    add_result_routes(svr, post_route, *store, *recorder, settings);
  // Last: a POST no route took, through post_route too (see there).
  post_route(".*", [](const httplib::Request&, const std::string&, httplib::Response& res) {
    send_error(res, 404, "not found");
  });

  if (!svr.bind_to_port(endpoint->host, endpoint->port))
    return fail("cannot listen on " + o.listen + ": " + std::strerror(errno) +
                " (another server on that port? ports below 1024 need root)");
  bool token_created = !token->has_value();
  if (token_created) {
    auto made = serve::create_token(token_path);
    if (!made) return fail(made.error());
    secret = *made;
  }

  // Ctrl-C and SIGTERM are taken by sigtimedwait() below, between looks
  // at the listener; blocked here, before any thread starts, so that every
  // thread inherits the mask and none is interrupted by them.
  sigset_t stops;
  sigemptyset(&stops);
  sigaddset(&stops, SIGINT);
  sigaddset(&stops, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stops, nullptr);

  std::string url = std::string(tls ? "https" : "http") + "://" +
                    (endpoint->host.find(':') != std::string::npos ? "[" + endpoint->host + "]" : endpoint->host) +
                    ":" + std::to_string(endpoint->port) + "/";
  std::fprintf(stderr, "ember: serving %s, %s %s\n", url.c_str(), spool ? "the agent's spool" : "results in",
               store->dir().c_str());
  if (token_created)
    std::fprintf(stderr, "ember: new access token (saved in %s); open %s?token=%s\n", token_path.c_str(), url.c_str(),
                 secret.c_str());
  else
    std::fprintf(stderr, "ember: open %s?token=TOKEN, with the token from %s\n", url.c_str(), token_path.c_str());
  if (!net::is_loopback(endpoint->host) && !tls)
    std::fprintf(stderr, "ember: warning: listening beyond this host without TLS: the token crosses the network "
                         "in clear (--tls-cert, --tls-key)\n");

  net::Listener listener(svr);
  bool signalled = false;
  while (!signalled && !listener.ended()) {
    timespec slice{0, 200'000'000};
    signalled = sigtimedwait(&stops, nullptr, &slice) > 0;
  }
  bool failed = listener.failed();
  listener.stop();
  if (recorder && recorder->status().state != RecorderStatus::State::Idle) {
    std::fprintf(stderr, "ember: stopping profile %s and writing it\n", recorder->status().result.id.c_str());
    recorder->request_stop();
    recorder->wait_idle();
  }
  if (failed) return fail("the server stopped listening");
  return 0;
}

}  // namespace ember
