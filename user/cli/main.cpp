// The ember command line.
#include <CLI/CLI.hpp>

#include <cstdio>
#include <map>
#include <string>

#include "flamegraph/output.h"
#include "user/events/event.h"
#include "user/fleet/agent.h"
#include "user/java/jvm.h"
#include "user/cli/record.h"
#include "user/serve/serve.h"
#include "user/cli/symbolize.h"
#include "user/cli/tools.h"
#include "version.h"  // build/version.h, from the file VERSION

namespace {

// -e's help, from the list of events record accepts.
std::string record_events_help() {
  std::string help = "What to record, one graph each (comma-separated):";
  const char* separator = " ";
  for (const ember::events::Event* e : ember::events::all()) {
    help += separator + std::string(e->name) + ": " + std::string(e->help);
    separator = "; ";
  }
  return help;
}

// Each command's options, bound to `o`: one table each, in the order
// --help lists them.
CLI::App* add_record(CLI::App& app, ember::RecordOptions& o) {
  CLI::App* c = app.add_subcommand("record", "Sample stacks of the whole host, some processes, or a command");
  c->add_option("-e,--event", o.session.events, record_events_help())
      ->delimiter(',')
      ->capture_default_str();
  c->add_option("--min-block", o.session.settings.min_block, "offcpu: leave out blocks shorter than this (500us, 2ms, 1s)")
      ->capture_default_str();
  c->add_option("--alloc-interval", o.session.settings.alloc_interval, "malloc, alloc: take a sample every this many bytes allocated")
      ->capture_default_str();
  c->add_flag("--live", o.session.settings.live,
                   "malloc, alloc: only allocations still not freed (Java: still reachable) at the end (leaks)");
  c->add_option("--min-age", o.session.settings.min_age,
                     "malloc, alloc with --live: only allocations at least this old at the end (30s, 5m): what "
                     "stays, not what is in flight (Java: no full GC forced at the end)");
  c->add_option("--min-gcs", o.session.settings.min_gcs,
                     "alloc with --live: only Java objects that survived at least this many garbage collections by "
                     "the end (no full GC forced)");
  c->add_flag("--waker", o.session.settings.waker,
                   "offcpu, lock: each blocked stack with the stack of whoever woke it, above a '--' frame "
                   "(as BCC's offwaketime)");
  c->add_option("-F,--freq", o.session.settings.frequency, "Samples per second per CPU")->capture_default_str();
  c->add_flag("-a,--all", o.all)->description("Profile every process on the host (the default without -p, --tid, --cgroup or a command)");
  c->add_option("-p,--pid", o.session.pids, "Profile only these processes (comma-separated)")->delimiter(',');
  c->add_option("--tid", o.session.tids, "Profile only these threads (comma-separated)")->delimiter(',');
  c->add_option("--cgroup", o.session.cgroups,
                     "Profile only tasks in this cgroup (v2) or below it: a directory under the cgroup2 mount, or "
                     "a path relative to it (system.slice/foo.service); repeat for several")
      ->allow_extra_args(false);
  c->add_option("--comm", o.session.comm, "Profile only processes or threads whose name matches this (POSIX extended) regex");
  c->add_option("-d,--duration", o.duration, "Stop after this many seconds (default: Ctrl-C, or when the command exits)");
  c->add_option("--window", o.window,
                     "Cut the recording into windows of this many seconds, each written to its own numbered file "
                     "(out.0001.html, out.0002.html, ...); the summary covers the last one")
      ->check(CLI::PositiveNumber);
  c->add_option("-o,--output", o.output,
                     "Output file; the format follows the extension: " + ember::flamegraph::output_extensions_text() +
                         ". With several events, .html and folded names get one file per event (out.EVENT.html); "
                         "pprof and OTLP hold them all in one file (a sample type, or a profile, per event)")
      ->capture_default_str();
  c->add_flag("--threads", o.session.thread_frames, "Add a frame per thread under its process");
  c->add_flag("--pid-frames", o.session.pid_frames, "Root frame per process as 'comm (pid)' instead of 'comm'");
  c->add_flag("--kernel-only", o.session.kernel_only, "Keep only kernel frames");
  c->add_flag("--user-only", o.session.user_only, "Keep only user-space frames");
  c->add_flag("--idle", o.session.idle, "Include samples of idle CPUs (swapper)");
  c->add_flag("--no-java{false}", o.session.java, "Do not attach ember's agent to JVMs (Java frames stay unnamed)");
  c->add_option("--java-attach", o.session.java_attach, "Attach the agent only to these JVMs (comma-separated pids)")
      ->delimiter(',');
  c->add_option("--attach-timeout", o.session.java_attach_timeout_s,
                     "Seconds a JVM may take to answer the attach and, separately, to load the agent (large JVMs "
                     "on a busy host take longer); past it, its Java frames stay unnamed")
      ->check(CLI::Range(0.1, 600.0))
      ->capture_default_str();
  c->add_flag("--preserve-frame-pointer", o.session.java_frame_pointers,
                   "Add -XX:+PreserveFramePointer to JVMs started by the command (ember steps through their JIT "
                   "frames without it, by the frame sizes its agent publishes; --unwind fp adds it)");
  c->add_flag("--lines", o.session.lines, "Add file:line to frame names (from DWARF)");
  c->add_flag("--no-inlines{false}", o.session.inlines, "Do not show inlined calls as frames of their own");
  c->add_option("--symbol-memory", o.session.symbol_memory_mib,
                     "MiB the symbolizer may hold (symbols, DWARF, caches), DWARF at most half; past that the largest "
                     "binaries lose inlined frames")
      ->capture_default_str();
  c->add_option("--unwind", o.session.unwind,
                     "How user stacks are unwound, in the kernel: cfi (from each binary's .eh_frame call frame "
                     "information: whole stacks without frame pointers), fp (frame pointers only: cheapest, but "
                     "code built without them loses callers), auto (cfi, and frame pointers for code without CFI, "
                     "such as JIT code)")
      ->check(CLI::IsMember({"auto", "cfi", "fp"}))
      ->capture_default_str();
  c->add_option("--unwind-memory", o.session.unwind_memory_mib,
                     "MiB of kernel memory for unwind tables (8 bytes per CFI row: libc takes 0.2 MiB, libjvm 1 "
                     "MiB); binaries past it are walked by frame pointers, and the summary names them")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  c->add_flag("-v,--verbose", o.session.verbose, "Show libbpf's messages (verifier log on load failures)");
  c->add_option("--progress-fd", o.progress_fd,
                     "Report to this open file descriptor as JSON lines: progress 4 times a second, warnings, "
                     "the error or the files written")
      ->group("Scripting");
  c->add_option("command", o.session.command, "Command to start and profile, after --, e.g. -- ./server --port 80");
  c->get_option("--kernel-only")->excludes("--user-only");
  return c;
}

const std::string kInputHelp =
    "Folded stacks, pprof, OpenTelemetry profiles (OTLP) or an HTML flamegraph ember wrote, told apart by content";
const std::string kEventHelp =
    "Which of a pprof's sample types, or an OTLP file's events, to read (e.g. offcpu, or cpu for a pprof's "
    "nanoseconds); default: the file's default. A wrong name lists those the file holds";

struct ConvertArgs {
  std::string input, output, event;
  ember::SpoolRange spool;
};

CLI::App* add_convert(CLI::App& app, ConvertArgs& o) {
  CLI::App* c = app.add_subcommand("convert", "Convert a profile between folded stacks, pprof, OTLP and HTML");
  c->add_option("input", o.input, kInputHelp + "; or ember agent's spool directory, one service's periods merged")
      ->required();
  c->add_option("-e,--event", o.event,
                kEventHelp + ". For a spool: the profile type (process_cpu, off_cpu, ... or cpu, offcpu)");
  c->add_option("-o,--output", o.output,
                "Output; the format follows the extension: " + ember::flamegraph::output_extensions_text())
      ->required();
  c->add_option("--service", o.spool.service, "Spool: the service_name to merge");
  c->add_option("--from", o.spool.from, "Spool: periods from this time, Unix seconds or UTC as 2026-11-26T03:00[:00]");
  c->add_option("--to", o.spool.to, "Spool: periods until this time (same forms)");
  return c;
}

struct ReportArgs {
  std::string input, event;
  size_t rows = 20;
};

CLI::App* add_report(CLI::App& app, ReportArgs& o) {
  CLI::App* c = app.add_subcommand("report", "Print the top functions of a profile by self time");
  c->add_option("input", o.input, kInputHelp)->required();
  c->add_option("-n,--top", o.rows, "How many functions")->capture_default_str();
  c->add_option("-e,--event", o.event, kEventHelp);
  return c;
}

struct DiffArgs {
  std::string base, later, output = "diff.html", event;
};

CLI::App* add_diff(CLI::App& app, DiffArgs& o) {
  CLI::App* c = app.add_subcommand("diff", "Differential flamegraph: NEW's shape, coloured by change against BASE");
  c->add_option("base", o.base, "The earlier profile (folded, pprof, OTLP or an HTML flamegraph ember wrote)")->required();
  c->add_option("new", o.later, "The later profile (folded, pprof, OTLP or an HTML flamegraph ember wrote)")->required();
  c->add_option("-o,--output", o.output, "Output .html")->capture_default_str();
  c->add_option("-e,--event", o.event,
                "Which sample type (pprof) or event (OTLP) of the two files to compare; default: their default");
  return c;
}

CLI::App* add_symbolize(CLI::App& app, ember::SymbolizeOptions& o) {
  CLI::App* c = app.add_subcommand("symbolize", "Name addresses of a binary, a process or the kernel (batch)");
  auto* elf_opt = c->add_option("-e,--elf", o.elf, "Addresses are this ELF file's virtual addresses");
  auto* pid_opt = c->add_option("-p,--pid", o.pid, "Addresses are this process's");
  auto* kernel_opt = c->add_flag("-k,--kernel", o.kernel, "Addresses are the kernel's");
  elf_opt->excludes(pid_opt)->excludes(kernel_opt);
  pid_opt->excludes(kernel_opt);
  c->add_flag("--lines", o.lines, "Add file:line to frame names");
  c->add_flag("--no-inlines{false}", o.inlines, "Do not show inlined calls");
  c->add_option("--symbol-memory", o.memory_mib, "MiB to hold at most, DWARF at most half")->capture_default_str();
  c->add_option("addresses", o.addresses, "Hex addresses (default: read from stdin, one per line)");
  return c;
}

// ember jvm: JVM telemetry (hsperfdata), class histograms and heaps (user/java/jvm.h).
CLI::App* add_jvm(CLI::App& app, ember::JvmOptions& o, std::string& min_age) {
  CLI::App* c = app.add_subcommand(
      "jvm", "Live heap, GC and allocation rate of a JVM, its class histogram, or what keeps its heap alive");
  c->add_option("pid", o.pid, "The JVM's pid")->required();
  auto* jvm_interval = c->add_option("-i,--interval", o.interval, "Seconds between lines")
                           ->check(CLI::Range(0.01, 86400.0))
                           ->capture_default_str();
  auto* jvm_count = c->add_option("-c,--count", o.count, "Lines to print (default: until Ctrl-C or the JVM exits)");
  auto* jvm_histo = c->add_flag("--histo", o.histo, "Print the class histogram (instances and bytes per class)");
  c->add_flag("--live", o.live,
                "Histogram (or with --track, histograms) of reachable objects only: the JVM runs a full GC first");
  c->add_option("--save", o.save, "Save the histogram (or with --heap, the classes' sizes) to this file, for a later --diff");
  c->add_option("--diff", o.diff,
                  "Print the change since this saved histogram (or with --heap, heap snapshot), largest change of bytes "
                  "(of retained bytes with --heap; gained or lost) first");
  c->add_option("-n,--top", o.top, "Rows of the histogram or the diff")->capture_default_str();
  jvm_histo->excludes(jvm_interval)->excludes(jvm_count);
  auto* jvm_heap = c->add_flag(
      "--heap", o.heap,
      "Dump the heap and read it from its GC roots (the JVM is paused for a full GC and the dump): retained bytes per "
      "class, the objects where memory accumulates and the shortest path that holds each");
  c->add_option("-o,--output", o.output,
                  "With --heap: the dominator tree as a flamegraph (root -> dominators -> class, width: retained bytes): " +
                      ember::flamegraph::output_extensions_text() +
                      ". With --leaks: the live profile of the objects held. With --track: a chart (.html) or .csv");
  auto* jvm_force = c->add_flag("--force", o.force,
                                "With --heap or --leaks: dump a heap of more than " +
                                    std::to_string(ember::kHeapDumpCap >> 20) +
                                    " MiB in use, or of unknown size, all the same");
  c->add_option("--alloc", o.alloc,
                  "With --heap: a recording of `ember record -e alloc --live` of this JVM (any output format): where "
                  "the classes that retain most were allocated")
      ->needs(jvm_heap);
  jvm_heap->excludes(jvm_histo)->excludes(jvm_interval)->excludes(jvm_count);
  auto* jvm_track = c->add_option(
      "--track", o.track,
      "Follow the instances and bytes of the classes matching this regex, from a class histogram every --every "
      "seconds (the JVM stops while it counts its heap)");
  c->add_option("--every", o.every, "With --track: seconds between histograms")
      ->check(CLI::Range(0.1, 86400.0))
      ->capture_default_str()
      ->needs(jvm_track);
  auto* jvm_duration =
      c->add_option("-d,--duration", o.duration,
                    "With --track: seconds to track (default: until Ctrl-C or the JVM exits); with --leaks: seconds "
                    "to follow allocations (default: 60, or until Ctrl-C)")
          ->check(CLI::Range(0.0, 1e9));
  jvm_track->excludes(jvm_histo)->excludes(jvm_heap)->excludes(jvm_interval)->excludes(jvm_count);
  auto* jvm_leaks = c->add_flag(
      "--leaks", o.leaks,
      "Follow the JVM's allocations (-d seconds), then dump its heap: the sites whose old objects grow steadily, and "
      "the paths from GC roots that hold those objects, with what they retain");
  c->add_option("--min-age", min_age,
                "With --leaks: only objects at least this old by the end (30s, 5m; default: a quarter of -d)")
      ->needs(jvm_leaks);
  c->add_option("--alloc-interval", o.alloc_interval, "With --leaks: take a sample every this many bytes allocated")
      ->capture_default_str()
      ->needs(jvm_leaks);
  c->add_option("--attach-timeout", o.attach_timeout,
                "With --leaks: seconds the JVM may take to open its attach socket, and to load ember's agent")
      ->check(CLI::Range(0.1, 3600.0))
      ->capture_default_str()
      ->needs(jvm_leaks);
  jvm_leaks->excludes(jvm_histo)->excludes(jvm_heap)->excludes(jvm_track)->excludes(jvm_interval)->excludes(jvm_count);
  // -d and --force go with one of two: checked after parsing (needs would want both).
  c->callback([jvm_duration, jvm_force, jvm_heap, jvm_track, jvm_leaks] {
    if (jvm_duration->count() && !jvm_track->count() && !jvm_leaks->count())
      throw CLI::ValidationError("-d,--duration", "goes with --track or --leaks");
    if (jvm_force->count() && !jvm_heap->count() && !jvm_leaks->count())
      throw CLI::ValidationError("--force", "goes with --heap or --leaks");
  });
  return c;
}

// ember serve: the web UI (user/serve/serve.h).
CLI::App* add_serve(CLI::App& app, ember::ServeOptions& o) {
  CLI::App* c = app.add_subcommand("serve", "Web UI and JSON API to start and stop profiles and open their results");
  c->add_option("--listen", o.listen, "ADDRESS:PORT to listen on ([::1]:8080 for IPv6)")->capture_default_str();
  c->add_option("--dir", o.dir, "Results directory (default: " + ember::default_results_dir() + ")");
  c->add_option("--token-file", o.token_file,
                    "Access token file (default: .token in the results directory; created, mode 0600, if missing)");
  auto* cert = c->add_option("--tls-cert", o.tls_cert, "Serve HTTPS with this PEM certificate");
  auto* key = c->add_option("--tls-key", o.tls_key, "... and this PEM private key");
  cert->needs(key);
  key->needs(cert);
  return c;
}

// ember agent: always-on profiling into Pyroscope (user/fleet/agent.h).
// Its keys are flags too (`values`: each key's as given).
CLI::App* add_agent(CLI::App& app, ember::fleet::AgentOptions& o, std::map<std::string, std::vector<std::string>>& values) {
  CLI::App* c = app.add_subcommand(
      "agent", "Profile the whole host without end: a profile per service every period, pushed to Grafana Pyroscope "
               "and kept in a spool");
  c->add_option("-c,--config", o.config_file, "TOML configuration; each of its keys is also a flag below, "
                                                         "which wins over the file");
  for (const ember::fleet::KeyInfo& k : ember::fleet::agent_keys()) {
    std::string name = k.name;
    auto* option = c->add_option("--" + name, values[name], k.help);
    if (name == "events" || name == "service_sources") option->delimiter(',');
    option->type_name("VALUE");
    if (!k.list) option->expected(1)->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    option->group(name.find('.') == std::string::npos ? "Keys" : "Keys: " + name.substr(0, name.find('.')));
  }
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember: a system-wide profiler for Linux (eBPF)", "ember"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ember " EMBER_VERSION);
  ember::RecordOptions rec;
  CLI::App* record = add_record(app, rec);
  ConvertArgs convert_args;
  CLI::App* convert = add_convert(app, convert_args);
  ReportArgs report_args;
  CLI::App* report = add_report(app, report_args);
  DiffArgs diff_args;
  CLI::App* diff = add_diff(app, diff_args);
  ember::SymbolizeOptions sym;
  CLI::App* symbolize = add_symbolize(app, sym);
  ember::JvmOptions jvm_opt;
  std::string jvm_min_age;
  CLI::App* jvm = add_jvm(app, jvm_opt, jvm_min_age);
  ember::ServeOptions serve_opt;
  CLI::App* serve = add_serve(app, serve_opt);
  ember::fleet::AgentOptions agent_opt;
  std::map<std::string, std::vector<std::string>> agent_values;
  CLI::App* agent = add_agent(app, agent_opt, agent_values);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (*record) return ember::run_record(rec);
  if (*convert) return ember::run_convert(convert_args.input, convert_args.output, convert_args.event, convert_args.spool);
  if (*report) return ember::run_report(report_args.input, report_args.rows, report_args.event);
  if (*symbolize) {
    if (sym.elf.empty() && !sym.pid && !sym.kernel) {
      std::fprintf(stderr, "ember symbolize: say whose addresses: --elf FILE, --pid PID or --kernel\n");
      return 2;
    }
    return ember::run_symbolize(sym);
  }
  if (*diff) return ember::run_diff(diff_args.base, diff_args.later, diff_args.output, diff_args.event);
  if (*jvm) {
    if (!jvm_min_age.empty()) {
      auto ns = ember::events::parse_duration_ns(jvm_min_age);
      if (!ns || !*ns) {
        std::fprintf(stderr, "ember jvm: --min-age %s is no duration (30s, 5m, 500ms)\n", jvm_min_age.c_str());
        return 2;
      }
      jvm_opt.min_age_ns = *ns;
    }
    return ember::run_jvm(jvm_opt);
  }
  if (*serve) return ember::run_serve(serve_opt);
  if (*agent) {
    for (const ember::fleet::KeyInfo& k : ember::fleet::agent_keys())
      if (agent->count(std::string("--") + k.name)) agent_opt.flags.emplace_back(k.name, agent_values[k.name]);
    return ember::fleet::run_agent(agent_opt);
  }
  return 0;
}
