#!/usr/bin/env python3
"""A Grafana Pyroscope stand-in for ember agent's tests, written from the
server's documented contracts, not from ember's code:

  POST /push.v1.PusherService/Push   Connect unary call, Content-Type
      application/proto, body a push.v1.PushRequest:
        PushRequest      { repeated RawProfileSeries series = 1; }
        RawProfileSeries { repeated LabelPair labels = 1; repeated RawSample samples = 2; }
        LabelPair        { string name = 1; string value = 2; }
        RawSample        { bytes raw_profile = 1; string ID = 2; }
  POST /ingest?name=APP.TYPE{k=v,...}&from=S&until=S   multipart/form-data
      with a `profile` (pprof) and an optional `sample_type_config` (JSON).
  POST /v1development/profiles   OTLP/HTTP (opentelemetry-proto v1.10.0),
      Content-Type application/x-protobuf, gzipped or not, an
      ExportProfilesServiceRequest; answered with an empty
      ExportProfilesServiceResponse. Read by the classes protoc generates
      from opentelemetry-proto's files (otlp_read.py: Debian's
      python3-protobuf, so run this receiver with /usr/bin/python3), each
      profile turned into a pprof and labelled as Pyroscope's receiver
      does (v1.20 on): the resource's attributes, service_name from
      service.name, __name__ process_cpu for samples/count every
      cpu/nanoseconds, off_cpu for off_cpu/nanoseconds, else the period
      type's; a period with a sample of several values is refused, as
      there.

Every profile it takes is written, gunzipped if it was gzipped, to
OUT/NNNNNN.pprof, and described by one JSON line in OUT/log.jsonl:
{"api", "labels", "id", "file", "bytes", "received", "time_ns",
"duration_ns"} (the last two the profile's own) (+ "name", "from",
"until", "sample_type_config" for /ingest; "total", the samples' summed
values, for OTLP). Anything malformed is answered
400 and logged with "error", and so is a profile over Pyroscope's limits
(max_profile_stacktrace_samples, max_profile_size_bytes: 16,000 samples
and 4 MiB before gzip unless told otherwise); a request is taken whole or
not at all.

  --status-file F  while F exists, every request is answered with the HTTP
                   status written in it (503, 429, 400 ...) and a JSON error,
                   and "answered STATUS" is printed
  --token T        requests must carry "Authorization: Bearer T"
  --basic U:P      requests must carry basic auth for user U, password P
  --tenant T       requests must carry "X-Scope-OrgID: T"
  --tls-cert C --tls-key K   serve HTTPS with this certificate and key
  --max-samples N  samples a profile may have (16000)
  --fail-series N  /ingest: the first request from the Nth on whose period
                   (from=) had a series taken already is answered 503, once
  --max-bytes N    bytes a profile may have before gzip (4194304)
"""
import argparse
import base64
import email.parser
import email.policy
import gzip
import json
import os
import ssl
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def varint(buf, pos):
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def fields(buf):
    """(field number, wire type, value) of a protobuf message."""
    pos = 0
    while pos < len(buf):
        key, pos = varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = varint(buf, pos)
        elif wire == 2:
            n, pos = varint(buf, pos)
            if pos + n > len(buf):
                raise ValueError("truncated field")
            value, pos = buf[pos:pos + n], pos + n
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:
            raise ValueError("wire type %d" % wire)
        yield number, wire, value


def decode_push_request(body):
    series = []
    for number, wire, value in fields(body):
        if number != 1 or wire != 2:
            continue
        labels, samples = {}, []
        for n, w, v in fields(value):
            if n == 1 and w == 2:
                pair = {k: val.decode() for k, _, val in fields(v) if k in (1, 2)}
                labels[pair.get(1, "")] = pair.get(2, "")
            elif n == 2 and w == 2:
                sample = {k: val for k, _, val in fields(v) if k in (1, 2)}
                samples.append((sample.get(1, b""), sample.get(2, b"").decode()))
        series.append((labels, samples))
    return series


def check_limits(profile, opts):
    """Pyroscope's validation of a pprof's size and sample count."""
    if profile[:2] == b"\x1f\x8b":
        profile = gzip.decompress(profile)
    if len(profile) > opts.max_bytes:
        raise ValueError("profile too big: %d bytes, the limit is %d" % (len(profile), opts.max_bytes))
    samples = sum(1 for number, wire, _ in fields(profile) if number == 2 and wire == 2)
    if samples > opts.max_samples:
        raise ValueError("profile has too many samples: %d, the limit is %d" % (samples, opts.max_samples))


class Store:
    def __init__(self, out):
        self.out = out
        self.lock = threading.Lock()
        # A restarted receiver (a backend outage) goes on numbering.
        self.count = sum(1 for f in os.listdir(out) if f.endswith(".pprof"))
        self.periods = set()  # /ingest: the from= of the series taken
        self.log = open(os.path.join(out, "log.jsonl"), "a", buffering=1)

    def keep(self, entry, profile):
        with self.lock:
            if profile[:2] == b"\x1f\x8b":
                profile = gzip.decompress(profile)
            self.count += 1
            name = "%06d.pprof" % self.count
            with open(os.path.join(self.out, name), "wb") as f:
                f.write(profile)
            top = {number: value for number, wire, value in fields(profile) if wire == 0}
            entry.update(file=name, bytes=len(profile), received=time.time(),
                         time_ns=top.get(9, 0), duration_ns=top.get(10, 0))
            if entry["api"] == "ingest":
                self.periods.add(str(entry["from"]))
            self.log.write(json.dumps(entry) + "\n")

    def error(self, path, message):
        with self.lock:
            self.log.write(json.dumps({"path": path, "error": message, "received": time.time()}) + "\n")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def answer(self, status, message="", otlp=False):
        if otlp and status == 200:  # an empty ExportProfilesServiceResponse
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = json.dumps({"code": status, "message": message}).encode() if status >= 300 else b"{}"
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(n)
        opts = self.server.opts
        if opts.status_file and os.path.exists(opts.status_file):
            with open(opts.status_file) as f:
                status = int(f.read().strip() or 503)
            print("answered %d" % status, flush=True)
            return self.answer(status, "the test says %d" % status)
        if opts.token and self.headers.get("Authorization") != "Bearer " + opts.token:
            return self.answer(401, "no or wrong bearer token")
        if opts.basic and self.headers.get("Authorization") != "Basic " + base64.b64encode(opts.basic.encode()).decode():
            return self.answer(401, "no or wrong basic auth")
        if opts.tenant and self.headers.get("X-Scope-OrgID") != opts.tenant:
            return self.answer(401, "no or wrong X-Scope-OrgID")
        if opts.fail_series and self.fail_series():
            return self.answer(503, "the test fails a period's later series")
        url = urllib.parse.urlsplit(self.path)
        try:
            if url.path == "/push.v1.PusherService/Push":
                self.push(body)
            elif url.path == "/ingest":
                self.ingest(url, body)
            elif url.path == "/v1development/profiles":
                if self.headers.get("Content-Type") not in ("application/x-protobuf", "application/protobuf"):
                    return self.answer(415, "Content-Type is not application/x-protobuf")
                self.otlp(body)
            else:
                return self.answer(404, "no such endpoint: " + url.path)
        except ValueError as e:
            self.server.store.error(self.path, str(e))
            return self.answer(400, str(e))
        self.answer(200, otlp=url.path == "/v1development/profiles")

    def fail_series(self):
        url = urllib.parse.urlsplit(self.path)
        period = urllib.parse.parse_qs(url.query).get("from", [None])[0]
        server = self.server
        with server.store.lock:
            server.requests += 1
            fail = server.requests >= server.opts.fail_series and period in server.store.periods
            if fail:
                server.opts.fail_series = 0
        return fail

    def push(self, body):
        if self.headers.get("Content-Type") != "application/proto":
            raise ValueError("Content-Type is not application/proto")
        series = decode_push_request(body)
        if not series:
            raise ValueError("no series")
        for labels, samples in series:
            if not labels.get("service_name") or not labels.get("__name__"):
                raise ValueError("a series without service_name or __name__: %r" % labels)
            for profile, _ in samples:
                check_limits(profile, self.server.opts)
        for labels, samples in series:
            for profile, sample_id in samples:
                self.server.store.keep({"api": "push", "labels": labels, "id": sample_id}, profile)

    def otlp(self, body):
        import otlp_read  # protoc's classes: only this endpoint needs them
        if self.headers.get("Content-Encoding", "").lower() == "gzip":
            body = gzip.decompress(body)
        try:
            msg = otlp_read.parse(body)
            kept = []
            for resource, profile, summary in otlp_read.profiles(msg):
                labels = {k: str(v) for k, v in resource.items() if isinstance(v, (str, int))}
                labels["service_name"] = labels.get("service.name") or "unknown_service:" + labels.get(
                    "process.executable.name", "")
                stype, ptype = tuple(summary["sample_type"]), tuple(summary["period_type"])
                if profile.period:
                    for sample in profile.samples:
                        if len(sample.values) > 1:
                            raise ValueError("sample values length mismatch: a period and %d values" % len(sample.values))
                if stype + ptype == ("samples", "count", "cpu", "nanoseconds") and profile.period:
                    labels["__name__"] = "process_cpu"
                elif stype == ("off_cpu", "nanoseconds") and not profile.period:
                    labels["__name__"] = "off_cpu"
                else:
                    labels["__name__"] = ptype[0] if profile.period else ""
                if not labels["__name__"]:
                    raise ValueError("a profile Pyroscope cannot name: sample type %s, no period" % (stype,))
                pprof = otlp_read.to_pprof(msg, profile)
                check_limits(pprof, self.server.opts)
                kept.append(({"api": "otlp", "labels": labels, "total": summary["total"]}, pprof))
        except otlp_read.Broken as e:
            raise ValueError("the request breaks OTLP's rules: %s" % e)
        except ValueError:
            raise
        except Exception as e:  # protobuf's DecodeError and the like
            raise ValueError("not an ExportProfilesServiceRequest: %s" % e)
        if not kept:
            raise ValueError("no profiles")
        for entry, pprof in kept:
            self.server.store.keep(entry, pprof)

    def ingest(self, url, body):
        query = urllib.parse.parse_qs(url.query)
        for key in ("name", "from", "until"):
            if key not in query:
                raise ValueError("no %s in the query" % key)
        ctype = self.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            raise ValueError("not multipart/form-data")
        message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body)
        parts = {p.get_param("name", header="content-disposition"): p.get_payload(decode=True)
                 for p in message.iter_parts()}
        if "profile" not in parts:
            raise ValueError("no profile part")
        config = json.loads(parts["sample_type_config"]) if "sample_type_config" in parts else None
        check_limits(parts["profile"], self.server.opts)
        self.server.store.keep({"api": "ingest", "name": query["name"][0], "from": int(query["from"][0]),
                                "until": int(query["until"][0]), "sample_type_config": config}, parts["profile"])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--status-file")
    p.add_argument("--token")
    p.add_argument("--tenant")
    p.add_argument("--basic")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--max-samples", type=int, default=16000)
    p.add_argument("--max-bytes", type=int, default=4 << 20)
    p.add_argument("--fail-series", type=int, default=0)
    opts = p.parse_args()
    os.makedirs(opts.out, exist_ok=True)
    ThreadingHTTPServer.allow_reuse_address = True
    server = ThreadingHTTPServer(("127.0.0.1", opts.port), Handler)
    server.opts = opts
    server.store = Store(opts.out)
    server.requests = 0
    if opts.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(opts.tls_cert, opts.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    print("listening", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
