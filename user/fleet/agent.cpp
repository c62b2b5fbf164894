#include "user/fleet/agent.h"

#include <malloc.h>
#include <pwd.h>
#include <signal.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "user/fleet/http.h"
#include "user/fleet/metrics.h"
#include "user/fleet/series.h"
#include "user/fleet/service.h"
#include "user/fleet/spool.h"
#include "user/host/host.h"
#include "user/session/session.h"

namespace ember::fleet {
namespace {

volatile sig_atomic_t g_stop = 0;
volatile sig_atomic_t g_reload = 0;

void on_stop(int) { g_stop = 1; }
void on_reload(int) { g_reload = 1; }

void log(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log(const char* format, ...) {
  char line[2048];
  va_list args;
  va_start(args, format);
  std::vsnprintf(line, sizeof line, format, args);
  va_end(args);
  std::fprintf(stderr, "ember agent: %s\n", line);
}

using Clock = std::chrono::steady_clock;

uint64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// Sends the spool's pending periods, oldest first, on its own thread: a
// slow or absent server never holds up sampling. A failure that may pass
// is retried after a back-off (doubling from 0.5 s to server.max_backoff,
// with jitter so a fleet does not retry in step); a refusal is logged and
// the period kept in the spool.
class Sender {
 public:
  Sender(const AgentConfig& config, Spool& spool, AgentMetrics& metrics) : spool_(spool), metrics_(metrics) {
    reconfigure(config);
    thread_ = std::thread([this] { run(); });
  }
  ~Sender() {
    if (!thread_.joinable()) return;  // finished
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      deadline_ = Clock::now();
    }
    wake_.notify_all();
    thread_.join();
  }
  void reconfigure(const AgentConfig& config) {
    std::lock_guard lock(mutex_);
    client_ = config.server.url.empty() ? nullptr : std::make_shared<PyroscopeClient>(config);
    max_backoff_s_ = config.server.max_backoff_s;
    backoff_s_ = kFirstBackoff;
    woken_ = true;
    wake_.notify_all();
  }
  void wake() {
    std::lock_guard lock(mutex_);
    woken_ = true;
    wake_.notify_all();
  }
  // Sends what is pending until all is sent, a push fails or `deadline`,
  // then stops.
  void finish(Clock::time_point deadline) {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
      deadline_ = deadline;
      woken_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

 private:
  static constexpr double kFirstBackoff = 0.5;

  // Waits until woken, for at most `seconds`, or until the deadline once
  // stopping; false when it is time to end.
  bool wait(double seconds) {
    std::unique_lock lock(mutex_);
    auto until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
    if (stop_) until = std::min(until, deadline_);
    wake_.wait_until(lock, until, [&] { return woken_ || (stop_ && Clock::now() >= deadline_); });
    woken_ = false;
    return !(stop_ && Clock::now() >= deadline_);
  }

  void run() {
    std::mt19937_64 random(std::random_device{}());
    for (;;) {
      std::shared_ptr<PyroscopeClient> client;
      bool stopping;
      {
        std::lock_guard lock(mutex_);
        client = client_;
        stopping = stop_;
        if (stop_ && Clock::now() >= deadline_) return;
      }
      auto entry = client ? spool_.oldest_pending() : std::nullopt;
      if (!entry) {
        if (stopping) return;  // all sent
        if (!wait(5)) return;
        continue;
      }
      auto body = Spool::read(spool_.dir(), *entry);
      if (!body) {
        // Lost like a refused period: counted so, or the agent's counts
        // would not add up to what it made.
        log("%s; the period is not sent", body.error().c_str());
        spool_.mark(*entry, Spool::State::Rejected);
        metrics_.profiles_rejected += entry->profiles;
        continue;
      }
      if (!*body) continue;  // a cap removed it
      auto t0 = Clock::now();
      SendResult r = client->send(*entry, **body, taken_.name == entry->name ? taken_.series : 0);
      taken_ = {entry->name, r.series_taken};
      metrics_.push_attempts++;
      metrics_.push_seconds_micros +=
          std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
      metrics_.bytes_sent += r.bytes_sent;
      if (r.next == SendResult::Next::Done) {
        if (!r.message.empty()) log("the server took the period of %s in part: %s", entry->name.c_str(), r.message.c_str());
        spool_.mark(*entry, Spool::State::Sent);
        metrics_.profiles_pushed += entry->profiles;
        metrics_.last_push_unix = static_cast<int64_t>(unix_seconds());
        if (failing_) log("the server takes profiles again");
        failing_ = false;
        std::lock_guard lock(mutex_);
        backoff_s_ = kFirstBackoff;
        continue;
      }
      if (r.next == SendResult::Next::GiveUp) {
        log("the server refused the period of %s (HTTP %d: %s); it stays in %s/%s and is not sent again",
            entry->name.c_str(), r.status, r.message.c_str(), spool_.dir().c_str(), entry->name.c_str());
        spool_.mark(*entry, Spool::State::Rejected);
        metrics_.profiles_rejected += entry->profiles;
        continue;
      }
      metrics_.push_failures++;
      // A stop does not wait on a failing server: the rest stays in the
      // spool for the next start.
      if (stopping) {
        log("push failed (%s%s) while stopping; the spool keeps the rest for the next start",
            r.status ? ("HTTP " + std::to_string(r.status) + ": ").c_str() : "", r.message.c_str());
        return;
      }
      double backoff;
      {
        std::lock_guard lock(mutex_);
        backoff = backoff_s_;
        backoff_s_ = std::min(backoff_s_ * 2, max_backoff_s_);
      }
      double jittered = std::uniform_real_distribution<double>(backoff / 2, backoff)(random);
      double delay = std::max(jittered, std::min(r.retry_after_s, max_backoff_s_));
      if (!failing_ || backoff >= max_backoff_s_)
        log("push failed (%s%s); the spool keeps the profiles, next try in %.1f s",
            r.status ? ("HTTP " + std::to_string(r.status) + ": ").c_str() : "", r.message.c_str(), delay);
      failing_ = true;
      if (!wait(delay)) return;
    }
  }

  Spool& spool_;
  AgentMetrics& metrics_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::shared_ptr<PyroscopeClient> client_;
  double max_backoff_s_ = 300;
  double backoff_s_ = kFirstBackoff;
  bool woken_ = false;
  bool stop_ = false;
  // How far the server took the period last tried (/ingest, a request per
  // series): its retry goes on from there, as /ingest counts a series sent
  // twice twice. Not kept across restarts.
  struct {
    std::string name;
    size_t series = 0;
  } taken_;
  Clock::time_point deadline_;
  bool failing_ = false;  // the sender thread's own
  std::thread thread_;
};

// Which JVMs found on the host get ember's agent: java.allow/deny by main
// class, java.allow_users/deny_users by user name or uid.
std::function<bool(pid_t)> java_filter(const AgentConfig::Java& java) {
  if (java.allow.empty() && java.deny.empty() && java.allow_users.empty() && java.deny_users.empty()) return {};
  auto compile = [](const std::vector<std::string>& texts) {
    std::vector<std::regex> out;
    for (const std::string& t : texts) out.emplace_back(t, std::regex::extended);
    return out;
  };
  return [allow = compile(java.allow), deny = compile(java.deny), java](pid_t pid) {
    std::string proc = "/proc/" + std::to_string(pid);
    std::string main_class = java_main_class(read_file(proc + "/cmdline"));
    auto any_match = [&](const std::vector<std::regex>& res) {
      return std::any_of(res.begin(), res.end(), [&](const std::regex& r) { return std::regex_match(main_class, r); });
    };
    if (!allow.empty() && !any_match(allow)) return false;
    if (any_match(deny)) return false;
    if (java.allow_users.empty() && java.deny_users.empty()) return true;
    std::string uid;
    std::istringstream status(read_file(proc + "/status"));
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("Uid:")) std::istringstream(line.substr(4)) >> uid;
    std::string user = uid;
    passwd pw, *found = nullptr;
    char buf[4096];
    if (!uid.empty() && getpwuid_r(static_cast<uid_t>(std::stoul(uid)), &pw, buf, sizeof buf, &found) == 0 && found)
      user = found->pw_name;
    auto named = [&](const std::vector<std::string>& users) {
      return std::find(users.begin(), users.end(), user) != users.end() ||
             std::find(users.begin(), users.end(), uid) != users.end();
    };
    if (!java.allow_users.empty() && !named(java.allow_users)) return false;
    return !named(java.deny_users);
  };
}

SessionConfig session_config(const AgentConfig& c) {
  SessionConfig s;
  s.events = c.events;
  s.settings = event_settings(c);
  s.thread_frames = c.thread_label;
  s.unwind = c.unwind;
  s.unwind_memory_mib = c.unwind_memory_mib;
  s.symbol_memory_mib = c.symbol_memory_mib;
  s.java = c.java.attach;
  s.java_allowed = java_filter(c.java);
  s.java_attach_timeout_s = c.java.attach_timeout_s;
  s.spelling = events::Spelling::Field;
  s.name_while_recording = false;  // nobody waits on a period's end; its memory is bounded
  s.jvm_telemetry = false;         // no period carries it
  return s;
}

// The keys whose change needs a new session (its programs are reloaded).
std::string sampling_keys(const AgentConfig& c) {
  std::ostringstream o;
  for (const std::string& e : c.events) o << e << ',';
  o << '|' << c.frequency << '|' << c.alloc_interval << '|' << c.live << '|' << c.min_age << '|' << c.min_gcs << '|'
    << c.thread_label << '|' << c.unwind << '|' << c.unwind_memory_mib << '|' << c.symbol_memory_mib << '|'
    << c.java.attach << '|' << c.java.attach_timeout_s;
  for (const auto* list : {&c.java.allow, &c.java.deny, &c.java.allow_users, &c.java.deny_users}) {
    o << '|';
    for (const std::string& s : *list) o << s << ',';
  }
  return o.str();
}

class Agent {
 public:
  Agent(const AgentOptions& options, AgentConfig config, std::unique_ptr<Spool> spool)
      : options_(options),
        config_(std::move(config)),
        spool_(std::move(spool)),
        namer_(config_.root, config_.service_sources),
        sender_(config_, *spool_, metrics_) {}

  int run() {
    if (!config_.metrics_listen.empty()) {
      auto m = MetricsServer::start(config_.metrics_listen, metrics_, *spool_);
      if (!m) {
        log("%s", m.error().c_str());
        return 1;
      }
      metrics_server_ = std::move(*m);
    }
    while (!g_stop) {
      auto session = start_session();
      if (!session) {
        log("%s", session.error().c_str());
        return 1;
      }
      bool restart = sample(**session);
      if (!restart) break;
      log("restarting sampling with the new configuration");
    }
    // What is pending goes now, within a bound; the rest waits in the spool
    // for the next start.
    double grace = std::min(30.0, config_.server.timeout_s * 2);
    sender_.finish(Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace)));
    Spool::Counts left = spool_->counts();
    std::string made;
    for (const auto& [key, value] : metrics_.made())
      made += (made.empty() ? "" : ", ") + key.first + " " + std::to_string(value) + " " + key.second;
    log("stopped after %llu periods (made %llu profiles: %s); pushed %llu, refused %llu, dropped %llu; %llu wait in %s",
        static_cast<unsigned long long>(metrics_.periods.load()),
        static_cast<unsigned long long>(metrics_.profiles.load()), made.empty() ? "none" : made.c_str(),
        static_cast<unsigned long long>(metrics_.profiles_pushed.load()),
        static_cast<unsigned long long>(metrics_.profiles_rejected.load()),
        static_cast<unsigned long long>(left.dropped_profiles), static_cast<unsigned long long>(left.pending_profiles),
        spool_->dir().c_str());
    return 0;
  }

 private:
  std::expected<std::unique_ptr<Session>, std::string> start_session() {
    std::vector<std::string> warnings;
    auto session = Session::create(session_config(config_), warnings);
    for (const std::string& w : warnings) log("warning: %s", w.c_str());
    if (!session) return std::unexpected(session.error());
    auto started = (*session)->start([] { return g_stop != 0; });
    if (!started) return std::unexpected(started.error());
    for (const std::string& w : (*session)->warnings()) log("warning: %s", w.c_str());
    if (auto armed = (*session)->arm(); !armed) return std::unexpected(armed.error());
    log("sampling %d CPUs at %u Hz, a profile per service every %g s, to %s (spool %s)", (*session)->cpus(),
        config_.frequency, config_.period_s, config_.server.url.empty() ? "the spool only" : config_.server.url.c_str(),
        spool_->dir().c_str());
    return session;
  }

  // Cuts periods until SIGTERM (false) or a reload that needs a new
  // session (true).
  bool sample(Session& session) {
    auto period = [&] {
      return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(config_.period_s));
    };
    Clock::time_point next_cut = Clock::now() + period();
    std::optional<AgentConfig> reloaded;
    for (;;) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(next_cut - Clock::now()).count();
      session.poll(static_cast<int>(std::clamp<int64_t>(left, 0, 200)));
      if (g_reload) {
        g_reload = 0;
        auto c = load_agent_config(options_.config_file, options_.flags);
        if (!c) {
          metrics_.reload_failures++;
          log("SIGHUP: the configuration is not taken, the old one stays: %s", c.error().c_str());
        } else {
          if (c->host.empty()) c->host = host_name();
          reloaded = std::move(*c);
          log("SIGHUP: configuration read; it takes effect at the end of this period");
        }
      }
      if (g_stop) {
        cut(session, true);
        return false;
      }
      if (Clock::now() < next_cut) continue;
      cut(session, false);
      // Periods keep their schedule: one cut late leaves the next shorter,
      // and one that would last less than half a period joins the one
      // after it (a profile of a few milliseconds says nothing).
      next_cut += period();
      if (next_cut - Clock::now() < period() / 2) next_cut += period();
      if (next_cut < Clock::now()) next_cut = Clock::now() + period();
      if (reloaded) {
        bool restart = sampling_keys(*reloaded) != sampling_keys(config_);
        config_ = std::move(*reloaded);
        reloaded.reset();
        metrics_.reloads++;
        sender_.reconfigure(config_);
        spool_->set_caps(config_.spool.max_bytes, config_.spool.max_age_s);
        namer_ = ServiceNamer(config_.root, config_.service_sources);
        if (restart) {
          cut(session, true);  // the little since the cut, not lost
          return true;
        }
        next_cut = Clock::now() + period();
      }
    }
  }

  void cut(Session& session, bool final) {
    std::vector<SeriesEvent> events;
    for (size_t v = 0; v < session.plan().events.size(); ++v)
      events.push_back({std::string(session.plan().events[v]->name), session.plan().views[v].live_only});
    PeriodSeries series(config_, namer_, events);
    Window w = session.cut(final, [&](size_t graph, uint32_t pid, const std::string& name,
                                      const flamegraph::Profile& profile, std::span<const flamegraph::FrameId> frames,
                                      uint64_t weight) { series.add(graph, pid, name, profile, frames, weight); });
    std::vector<const flamegraph::Profile*> graphs;
    for (const WindowGraph& g : w.graphs) graphs.push_back(&g.profile);
    std::vector<Series> out = series.finish(graphs, w.start_unix_ns, static_cast<uint64_t>(w.seconds * 1e9));
    for (size_t i = 0; i < graphs.size(); ++i) {
      const SeriesEvent& e = events[i];
      metrics_.add_made(e.live ? flamegraph::inuse_type(e.name) : e.name, graphs[i]->unit, series.total(i));
      if (e.live) metrics_.set_live(e.name, series.total(i));
    }
    for (uint32_t pid : w.forgotten) namer_.forget(static_cast<pid_t>(pid));
    for (const std::string& warning : w.symbol_warnings) log("warning: %s", warning.c_str());

    metrics_.samples += w.counters.seen;
    metrics_.lost_samples += w.counters.lost;
    metrics_.stacks += series.stacks();
    metrics_.periods++;
    metrics_.profiles += out.size();
    metrics_.profiles_relabel_dropped += series.dropped();
    metrics_.profiles_cut += series.cut();
    metrics_.symbolizer_bytes = session.symbolizer().memory_bytes();
    metrics_.symbolizer_files = session.symbolizer().open_files();
    metrics_.jvms = session.java_streams().size();
    if (w.counters.lost) log("%llu records lost this period: the ring buffer was full", static_cast<unsigned long long>(w.counters.lost));
    if (out.empty()) return;
    std::string body = encode_push_request(out);
    auto state = config_.server.url.empty() ? Spool::State::Sent : Spool::State::Pending;
    uint64_t removed_before = spool_->counts().full_disk_removals;
    auto added = spool_->add(w.start_unix_ns, static_cast<uint64_t>(w.seconds * 1000), static_cast<uint32_t>(out.size()),
                             body, state);
    if (!added) log("a period is lost: %s", added.error().c_str());
    if (uint64_t removed = spool_->counts().full_disk_removals - removed_before)
      log("the spool's disk is full: %llu oldest periods removed from %s to make room",
          static_cast<unsigned long long>(removed), spool_->dir().c_str());
    sender_.wake();
    // What the period freed (its graphs, binaries the symbolizer let go)
    // goes back to the kernel: glibc keeps freed heap pages otherwise, and
    // the agent's RSS would show its peak rather than what it holds.
    malloc_trim(0);
  }

  const AgentOptions& options_;
  AgentConfig config_;
  std::unique_ptr<Spool> spool_;
  AgentMetrics metrics_;
  ServiceNamer namer_;
  Sender sender_;
  std::unique_ptr<MetricsServer> metrics_server_;
};

}  // namespace

int run_agent(const AgentOptions& options) {
  auto config = load_agent_config(options.config_file, options.flags);
  if (!config) {
    std::fprintf(stderr, "ember agent: %s\n", config.error().c_str());
    return 2;
  }
  if (config->host.empty()) config->host = host_name();
  auto spool = Spool::open(config->spool.dir, config->spool.max_bytes, config->spool.max_age_s);
  if (!spool) {
    std::fprintf(stderr, "ember agent: %s\n", spool.error().c_str());
    return 2;
  }
  struct sigaction sa{};
  sa.sa_handler = on_stop;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  sa.sa_handler = on_reload;
  sigaction(SIGHUP, &sa, nullptr);
  signal(SIGPIPE, SIG_IGN);
  Agent agent(options, std::move(*config), std::move(*spool));
  return agent.run();
}

}  // namespace ember::fleet
