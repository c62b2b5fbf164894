#include "user/fleet/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

// toml++ 3.3 (Debian 12) checks some of its parser's assumptions with
// assert(), which malformed input breaks (" [,1" reaches parse_key at the
// ','): ember agent aborted, at its start or on a SIGHUP reload (found by
// AFL). The check throws instead, and the file is said not to be TOML; in
// the library's noexcept functions it still ends the program, as assert did.
namespace ember::fleet {
struct TomlCheckFailed {};
}  // namespace ember::fleet
#define TOML_ASSERT(expr) ((expr) ? static_cast<void>(0) : throw ::ember::fleet::TomlCheckFailed{})
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wterminate"
#include <toml++/toml.h>
#pragma GCC diagnostic pop

#include "user/events/event.h"
#include "user/net/address.h"

namespace ember::fleet {
namespace {

// A key's setter: nothing, or what is wrong with the values and the fix.
using Setter = std::function<std::optional<std::string>(AgentConfig&, const std::vector<std::string>&)>;

struct Key {
  KeyInfo info;
  Setter set;
};

std::optional<std::string> one_value(const std::vector<std::string>& v) {
  if (v.size() != 1) return "takes one value, not " + std::to_string(v.size());
  return std::nullopt;
}

Setter text(std::function<std::string&(AgentConfig&)> field) {
  return [field](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    field(c) = v[0];
    return std::nullopt;
  };
}

Setter seconds(std::function<double&(AgentConfig&)> field, double min, double max) {
  return [field, min, max](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    auto s = parse_seconds(v[0]);
    if (!s) return "'" + v[0] + "' is not a duration: give it as 15s, 500ms, 2m or 24h";
    if (*s < min || *s > max) {
      std::ostringstream o;
      o << "'" << v[0] << "' is out of range: give " << min << " s to " << max << " s";
      return o.str();
    }
    field(c) = *s;
    return std::nullopt;
  };
}

Setter whole(std::function<uint32_t&(AgentConfig&)> field, uint32_t min, uint32_t max) {
  return [field, min, max](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    char* end = nullptr;
    errno = 0;
    unsigned long long n = std::strtoull(v[0].c_str(), &end, 10);
    if (v[0].empty() || *end || errno || v[0][0] == '-') return "'" + v[0] + "' is not a whole number";
    if (n < min || n > max)
      return "'" + v[0] + "' is out of range: give " + std::to_string(min) + " to " + std::to_string(max);
    field(c) = static_cast<uint32_t>(n);
    return std::nullopt;
  };
}

// A size of at least 64 KiB; `examples` for the error ("4MiB").
Setter size(std::function<uint64_t&(AgentConfig&)> field, const char* examples) {
  return [field, examples](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    auto b = parse_bytes(v[0]);
    if (!b || *b < (64u << 10)) return "'" + v[0] + "' is not a size of at least 64KiB (give " + examples + ")";
    field(c) = *b;
    return std::nullopt;
  };
}

Setter boolean(std::function<bool&(AgentConfig&)> field) {
  return [field](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    if (v[0] != "true" && v[0] != "false") return "'" + v[0] + "' is not true or false";
    field(c) = v[0] == "true";
    return std::nullopt;
  };
}

Setter strings(std::function<std::vector<std::string>&(AgentConfig&)> field) {
  return [field](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    field(c) = v;
    return std::nullopt;
  };
}

// Regular expressions that must compile: checked here, used elsewhere.
Setter regexes(std::function<std::vector<std::string>&(AgentConfig&)> field) {
  return [field](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    for (const std::string& r : v) try {
        std::regex check(r, std::regex::extended);
      } catch (const std::regex_error& e) {
        return "'" + r + "' is not a POSIX extended regular expression: " + e.what();
      }
    field(c) = v;
    return std::nullopt;
  };
}

Setter one_of(std::function<std::string&(AgentConfig&)> field, std::vector<std::string> allowed) {
  return [field, allowed](AgentConfig& c, const std::vector<std::string>& v) -> std::optional<std::string> {
    if (auto e = one_value(v)) return e;
    if (std::find(allowed.begin(), allowed.end(), v[0]) == allowed.end()) {
      std::string list;
      for (const std::string& a : allowed) list += (list.empty() ? "" : ", ") + a;
      return "'" + v[0] + "' is not one of " + list;
    }
    field(c) = v[0];
    return std::nullopt;
  };
}

bool valid_label_name(const std::string& name) {
  static const std::regex re("[a-zA-Z_][a-zA-Z0-9_]*");
  return std::regex_match(name, re);
}

std::expected<RelabelRule, std::string> make_rule(const std::string& action, std::string label, std::string regex,
                                                  std::string target, std::string replacement) {
  RelabelRule r;
  if (action == "keep")
    r.action = RelabelRule::Action::Keep;
  else if (action == "drop")
    r.action = RelabelRule::Action::Drop;
  else if (action == "replace")
    r.action = RelabelRule::Action::Replace;
  else
    return std::unexpected("action '" + action + "' is not keep, drop or replace");
  if (!valid_label_name(label)) return std::unexpected("'" + label + "' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)");
  if (r.action == RelabelRule::Action::Replace && !valid_label_name(target))
    return std::unexpected("replace needs a target label name, not '" + target + "'");
  try {
    r.regex = std::regex(regex, std::regex::extended);
  } catch (const std::regex_error& e) {
    return std::unexpected("'" + regex + "' is not a POSIX extended regular expression: " + e.what());
  }
  r.label = std::move(label);
  r.regex_text = std::move(regex);
  r.target = std::move(target);
  r.replacement = std::move(replacement);
  return r;
}

// The flag's form: "keep LABEL REGEX", "drop LABEL REGEX" or
// "replace LABEL REGEX TARGET REPLACEMENT" (an empty replacement may be left off).
std::expected<RelabelRule, std::string> parse_rule(const std::string& text) {
  std::vector<std::string> f;
  std::istringstream in(text);
  for (std::string w; in >> w;) f.push_back(w);
  bool replace = !f.empty() && f[0] == "replace";
  if (f.size() != 3 && !(replace && (f.size() == 4 || f.size() == 5)))
    return std::unexpected("'" + text +
                           "' is not a rule: give 'keep LABEL REGEX', 'drop LABEL REGEX' or 'replace LABEL REGEX "
                           "TARGET REPLACEMENT'");
  return make_rule(f[0], f[1], f[2], replace ? f[3] : "", f.size() == 5 ? f[4] : "");
}

// Every key and its check. Long: a table, an entry per key.
const std::vector<Key>& keys() {
  using C = AgentConfig;
  static const std::vector<Key> all = {
      {{"period", "How often a profile per service is cut and sent (15s, 1m)", false},
       seconds([](C& c) -> double& { return c.period_s; }, 1, 3600)},
      {{"frequency", "Samples per second per CPU", false},
       whole([](C& c) -> uint32_t& { return c.frequency; }, 1, 10000)},
      {{"events", "Profile types, as ember record's -e: cpu, offcpu, wall, lock, malloc, alloc", true},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto known = events::check_names(v, events::Spelling::Field); !known) return known.error();
         c.events = v;
         return std::nullopt;
       }},
      {{"alloc_interval", "Allocations (malloc, alloc): a sample per this many bytes allocated (512KiB, 1MiB)", false},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto e = one_value(v)) return e;
         auto b = parse_bytes(v[0]);
         if (!b || *b == 0) return "'" + v[0] + "' is not a size of at least 1 byte (give 512KiB, 1MiB)";
         c.alloc_interval = *b;
         return std::nullopt;
       }},
      {{"live",
        "Allocations (malloc, alloc): send each period what is still live at its end, allocated since the agent "
        "started (sample type malloc_inuse, alloc_inuse), not what the period allocated",
        false},
       boolean([](C& c) -> bool& { return c.live; })},
      {{"min_age", "With live: only allocations at least this old at the period's end (30s, 5m)", false},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto e = one_value(v)) return e;
         if (!v[0].empty() && !events::parse_duration_ns(v[0]))
           return "'" + v[0] + "' is not a duration: give e.g. 30s, 5m or 500ms";
         c.min_age = v[0];
         return std::nullopt;
       }},
      {{"min_gcs", "With live, Java: only objects that survived this many collections", false},
       whole([](C& c) -> uint32_t& { return c.min_gcs; }, 0, 1000000)},
      {{"unwind", "User stacks: auto, cfi or fp (as ember record --unwind)", false},
       one_of([](C& c) -> std::string& { return c.unwind; }, {"auto", "cfi", "fp"})},
      {{"unwind_memory", "MiB of kernel memory for unwind tables", false},
       whole([](C& c) -> uint32_t& { return c.unwind_memory_mib; }, 1, 4096)},
      {{"symbol_memory", "MiB the symbolizer may hold (symbols, DWARF at most half, caches)", false},
       whole([](C& c) -> uint32_t& { return c.symbol_memory_mib; }, 16, 65536)},
      {{"root", "Where the host's file system is (/host when the agent runs in a container)", false}, text([](C& c) -> std::string& { return c.root; })},
      {{"host", "The host label (default: the host name)", false}, text([](C& c) -> std::string& { return c.host; })},
      {{"labels", "Labels added to every series, NAME=VALUE", true},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         c.labels.clear();
         for (const std::string& kv : v) {
           size_t eq = kv.find('=');
           if (eq == std::string::npos || !valid_label_name(kv.substr(0, eq)) || kv.starts_with("__"))
             return "'" + kv + "' is not NAME=VALUE with a label name ([a-zA-Z_][a-zA-Z0-9_]*, not __*)";
           c.labels[kv.substr(0, eq)] = kv.substr(eq + 1);
         }
         return std::nullopt;
       }},
      {{"service_sources",
        "Where service_name comes from, first that names a process wins: kubernetes, docker, systemd, java, "
        "python, node, exe",
        true},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         const auto& known = ServiceNamer::kAllSources;
         for (const std::string& s : v)
           if (std::find(known.begin(), known.end(), s) == known.end()) {
             std::string all;
             for (const std::string& k : known) all += (all.empty() ? "" : ", ") + k;
             return "'" + s + "' is not one of " + all;
           }
         if (v.empty()) return "needs at least one source (exe names every process)";
         c.service_sources = v;
         return std::nullopt;
       }},
      {{"pid_label", "A series per process, labelled pid (many series)", false},
       boolean([](C& c) -> bool& { return c.pid_label; })},
      {{"thread_label", "Label each sample with its thread (pprof labels thread and tid)", false},
       boolean([](C& c) -> bool& { return c.thread_label; })},
      {{"relabel", "Relabeling rules, in order: 'keep LABEL REGEX', 'drop LABEL REGEX', 'replace LABEL REGEX TARGET REPLACEMENT'", true},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         c.relabel.clear();
         for (const std::string& text : v) {
           auto r = parse_rule(text);
           if (!r) return r.error();
           c.relabel.push_back(std::move(*r));
         }
         return std::nullopt;
       }},
      {{"server.url", "Pyroscope's base URL, http:// or https:// (none: profiles only go to the spool)", false},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto e = one_value(v)) return e;
         if (!v[0].empty())
           if (auto u = net::parse_url(v[0]); !u) return u.error();
         c.server.url = v[0];
         return std::nullopt;
       }},
      {{"server.api",
        "push (Pyroscope's push API), ingest (the older /ingest endpoint) or otlp (OpenTelemetry's profiles, "
        "OTLP/HTTP: POST /v1development/profiles)",
        false},
       one_of([](C& c) -> std::string& { return c.server.api; }, {"push", "ingest", "otlp"})},
      {{"server.tenant", "Tenant: the X-Scope-OrgID header", false},
       text([](C& c) -> std::string& { return c.server.tenant; })},
      {{"server.user", "Basic auth user (with server.password_file)", false},
       text([](C& c) -> std::string& { return c.server.user; })},
      {{"server.password_file", "File holding the basic auth password", false},
       text([](C& c) -> std::string& { return c.server.password_file; })},
      {{"server.token_file", "File holding a bearer token", false},
       text([](C& c) -> std::string& { return c.server.token_file; })},
      {{"server.ca_file", "PEM file of the CA that signed the server's certificate (besides the system's)", false},
       text([](C& c) -> std::string& { return c.server.ca_file; })},
      {{"server.timeout", "Per request: connecting, sending and reading the answer", false},
       seconds([](C& c) -> double& { return c.server.timeout_s; }, 0.1, 600)},
      {{"server.max_backoff", "The longest wait between retries of a failed push", false},
       seconds([](C& c) -> double& { return c.server.max_backoff_s; }, 0.5, 3600)},
      {{"server.max_samples",
        "Samples a profile may have (Pyroscope's max_profile_stacktrace_samples): the lightest stacks are cut short "
        "to fit",
        false},
       whole([](C& c) -> uint32_t& { return c.server.max_samples; }, 16, 1u << 30)},
      {{"server.max_profile_size",
        "Size a profile may have before gzip (Pyroscope's max_profile_size_bytes): more stacks are cut to fit", false},
       size([](C& c) -> uint64_t& { return c.server.max_profile_bytes; }, "4MiB")},
      {{"spool.dir", "Where every profile is kept (sent or not) up to the caps", false},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto e = one_value(v)) return e;
         if (v[0].empty()) return "needs a directory";
         c.spool.dir = v[0];
         return std::nullopt;
       }},
      {{"spool.max_size", "The spool's cap (512MiB, 1GiB): the oldest profiles go first", false},
       size([](C& c) -> uint64_t& { return c.spool.max_bytes; }, "512MiB, 1GiB")},
      {{"spool.max_age", "How long profiles are kept in the spool (24h, 7d is 168h)", false},
       seconds([](C& c) -> double& { return c.spool.max_age_s; }, 60, 365 * 86400.0)},
      {{"metrics.listen", "ADDRESS:PORT of the Prometheus /metrics endpoint (empty: none)", false},
       [](C& c, const std::vector<std::string>& v) -> std::optional<std::string> {
         if (auto e = one_value(v)) return e;
         if (!v[0].empty())
           if (auto a = net::parse_listen(v[0]); !a) return a.error();
         c.metrics_listen = v[0];
         return std::nullopt;
       }},
      {{"java.attach", "Attach ember's agent to JVMs, running and started later", false},
       boolean([](C& c) -> bool& { return c.java.attach; })},
      {{"java.attach_timeout", "How long a JVM may take to answer the attach and, separately, to load the agent (10s, 30s)", false},
       seconds([](C& c) -> double& { return c.java.attach_timeout_s; }, 0.1, 600)},
      {{"java.allow", "Attach only to JVMs whose main class (or jar) matches one of these regexes", true},
       regexes([](C& c) -> std::vector<std::string>& { return c.java.allow; })},
      {{"java.deny", "Never attach to JVMs whose main class (or jar) matches one of these regexes", true},
       regexes([](C& c) -> std::vector<std::string>& { return c.java.deny; })},
      {{"java.allow_users", "Attach only to JVMs run by these users (names or uids)", true},
       strings([](C& c) -> std::vector<std::string>& { return c.java.allow_users; })},
      {{"java.deny_users", "Never attach to JVMs run by these users (names or uids)", true},
       strings([](C& c) -> std::vector<std::string>& { return c.java.deny_users; })},
  };
  return all;
}

const Key* find_key(const std::string& name) {
  for (const Key& k : keys())
    if (name == k.info.name) return &k;
  return nullptr;
}

std::string read_secret(const std::string& path, std::string& error, const char* key) {
  std::ifstream in(path);
  std::string s;
  if (!in || !std::getline(in, s)) {
    error = std::string(key) + ": cannot read '" + path + "': " + std::strerror(errno) +
            "; give a readable file whose first line is the secret";
    return {};
  }
  if (s.empty()) error = std::string(key) + ": '" + path + "' starts with an empty line; put the secret on its first line";
  return s;
}

// Checks what no single key can: files, the spool's directory, pairs of keys.
std::optional<std::string> check_whole(AgentConfig& c) {
  std::string error;
  if (!c.server.password_file.empty() && c.server.user.empty())
    return "server.password_file: needs server.user (basic auth)";
  if (!c.server.user.empty() && c.server.password_file.empty())
    return "server.user: needs server.password_file (basic auth)";
  if (!c.server.user.empty() && !c.server.token_file.empty())
    return "server.token_file: give basic auth (server.user) or a bearer token, not both";
  if (!c.server.password_file.empty()) c.password = read_secret(c.server.password_file, error, "server.password_file");
  if (error.empty() && !c.server.token_file.empty()) c.token = read_secret(c.server.token_file, error, "server.token_file");
  if (!error.empty()) return error;
  if (!c.server.ca_file.empty() && access(c.server.ca_file.c_str(), R_OK) != 0)
    return "server.ca_file: cannot read '" + c.server.ca_file + "': " + std::strerror(errno);
  if (!c.server.ca_file.empty() && !c.server.url.starts_with("https://"))
    return "server.ca_file: only for an https:// server.url";
  // Profiles hold code names and command lines: the spool is its owner's only.
  std::error_code ec;
  std::filesystem::path spool(c.spool.dir);
  if (spool.has_parent_path()) std::filesystem::create_directories(spool.parent_path(), ec);
  if (!ec && mkdir(c.spool.dir.c_str(), 0700) != 0 && errno != EEXIST) ec = std::error_code(errno, std::system_category());
  if (ec) return "spool.dir: cannot create '" + c.spool.dir + "': " + ec.message() + "; give a writable directory";
  std::string probe = c.spool.dir + "/.ember-write-test";
  int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0)
    return "spool.dir: cannot write in '" + c.spool.dir + "': " + std::strerror(errno) + "; give a writable directory";
  close(fd);
  unlink(probe.c_str());
  if (c.events.empty()) return "events: needs at least one (cpu)";
  if (c.root.empty() || c.root[0] != '/') return "root: '" + c.root + "' is not an absolute path";
  // What the events ask of the other keys and of this host (java.attach
  // for alloc, the kernel's highest frequency), as a recording checks it.
  events::Settings settings = event_settings(c);
  events::Scope scope;
  scope.java = c.java.attach;
  std::vector<std::string> warnings;
  if (auto plan = events::plan(c.events, settings, scope, read_host_facts(), warnings, events::Spelling::Field); !plan)
    return plan.error();
  return std::nullopt;
}

// A TOML value as the texts a flag would give.
std::optional<std::vector<std::string>> as_texts(const toml::node& n) {
  auto scalar = [](const toml::node& v) -> std::optional<std::string> {
    if (auto s = v.as_string()) return s->get();
    if (auto i = v.as_integer()) return std::to_string(i->get());
    if (auto b = v.as_boolean()) return b->get() ? "true" : "false";
    if (auto f = v.as_floating_point()) {
      std::ostringstream o;
      o << f->get();
      return o.str();
    }
    return std::nullopt;
  };
  if (auto a = n.as_array()) {
    std::vector<std::string> out;
    for (const toml::node& e : *a) {
      auto s = scalar(e);
      if (!s) return std::nullopt;
      out.push_back(*s);
    }
    return out;
  }
  if (auto t = n.as_table()) {
    std::vector<std::string> out;
    for (const auto& [k, v] : *t) {
      auto s = scalar(v);
      if (!s) return std::nullopt;
      out.push_back(std::string(k.str()) + "=" + *s);
    }
    return out;
  }
  if (auto s = scalar(n)) return std::vector<std::string>{*s};
  return std::nullopt;
}

std::string where(const std::string& file, const toml::node& n) {
  return file + ":" + std::to_string(n.source().begin.line) + ": ";
}

// The file's [[relabel]] tables, each {action, label, regex, target, replacement}.
std::optional<std::string> read_relabel(const std::string& file, const toml::node& n, AgentConfig& c) {
  const toml::array* a = n.as_array();
  if (!a) return where(file, n) + "relabel: give [[relabel]] tables (action, label, regex, target, replacement)";
  c.relabel.clear();
  for (const toml::node& e : *a) {
    const toml::table* t = e.as_table();
    if (!t) return where(file, e) + "relabel: each rule is a table (action, label, regex, target, replacement)";
    for (const auto& [k, v] : *t)
      if (k != "action" && k != "label" && k != "regex" && k != "target" && k != "replacement")
        return where(file, v) + "relabel: unknown field '" + std::string(k.str()) +
               "' (a rule has action, label, regex, target, replacement)";
    auto field = [&](const char* name) { return std::string((*t)[name].value_or(std::string_view{})); };
    auto r = make_rule(field("action"), field("label"), field("regex"), field("target"), field("replacement"));
    if (!r) return where(file, e) + "relabel: " + r.error();
    c.relabel.push_back(std::move(*r));
  }
  return std::nullopt;
}

std::optional<std::string> read_table(const std::string& file, const toml::table& table, const std::string& prefix,
                                      AgentConfig& c) {
  // In the file's order (a table iterates by name): the first mistake is told.
  std::vector<std::pair<std::string_view, const toml::node*>> items;
  for (const auto& [k, v] : table) items.emplace_back(k.str(), &v);
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) {
    return a.second->source().begin.line < b.second->source().begin.line;
  });
  for (const auto& [k, node] : items) {
    const toml::node& v = *node;
    std::string name = prefix + std::string(k);
    if (name == "relabel") {
      if (auto e = read_relabel(file, v, c)) return e;
      continue;
    }
    const Key* key = find_key(name);
    if (!key && v.is_table() && prefix.empty() && name != "labels") {
      if (auto e = read_table(file, *v.as_table(), name + ".", c)) return e;
      continue;
    }
    if (!key) return where(file, v) + "unknown key '" + name + "'; `ember agent --help` lists the keys";
    auto texts = as_texts(v);
    if (!texts) return where(file, v) + name + ": not a value this key takes";
    if (!key->info.list && texts->size() != 1) return where(file, v) + name + ": takes one value, not a list";
    if (auto e = key->set(c, *texts)) return where(file, v) + name + ": " + *e;
  }
  return std::nullopt;
}

}  // namespace

events::Settings event_settings(const AgentConfig& c) {
  events::Settings s;
  s.frequency = c.frequency;
  s.alloc_interval = c.alloc_interval;
  s.live = c.live;
  s.min_age = c.min_age;
  s.min_gcs = c.min_gcs;
  return s;
}

const std::vector<KeyInfo>& agent_keys() {
  static const std::vector<KeyInfo> infos = [] {
    std::vector<KeyInfo> out;
    for (const Key& k : keys()) out.push_back(k.info);
    return out;
  }();
  return infos;
}

std::expected<AgentConfig, std::string> parse_agent_config(std::istream* in, const std::string& file,
                                                          const KeyValues& flags) {
  AgentConfig c;
  if (in) {
    try {
      toml::table table = toml::parse(*in, file);
      if (auto e = read_table(file, table, "", c)) return std::unexpected(*e);
    } catch (const toml::parse_error& e) {
      return std::unexpected(file + ":" + std::to_string(e.source().begin.line) + ": not TOML: " +
                             std::string(e.description()));
    } catch (const TomlCheckFailed&) {
      return std::unexpected(file + ": not TOML: the parser met something it cannot read (a stray bracket, comma or control character): fix the file");
    }
  }
  for (const auto& [name, values] : flags) {
    const Key* key = find_key(name);
    if (!key) return std::unexpected("--" + name + ": not a key of ember agent");
    if (auto e = key->set(c, values)) return std::unexpected("--" + name + ": " + *e);
  }
  return c;
}

std::expected<AgentConfig, std::string> load_agent_config(const std::string& file, const KeyValues& flags) {
  std::ifstream in;
  if (!file.empty()) {
    in.open(file);
    if (!in) return std::unexpected("--config: cannot read '" + file + "': " + std::strerror(errno));
  }
  auto c = parse_agent_config(file.empty() ? nullptr : &in, file, flags);
  if (!c) return c;
  if (auto e = check_whole(*c)) return std::unexpected(*e);
  return c;
}

std::optional<double> parse_seconds(const std::string& text) {
  return events::parse_scaled(text, {{"", 1}, {"s", 1}, {"ms", 1e-3}, {"m", 60}, {"h", 3600}});
}

std::optional<uint64_t> parse_bytes(const std::string& text) {
  auto b = events::parse_scaled(text, {{"", 1}, {"B", 1}, {"KiB", 1024.0}, {"MiB", 1024.0 * 1024}, {"GiB", 1024.0 * 1024 * 1024},
                         {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}});
  if (!b || *b > 1e18) return std::nullopt;
  return static_cast<uint64_t>(*b);
}

}  // namespace ember::fleet
