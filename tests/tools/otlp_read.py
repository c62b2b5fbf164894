#!/usr/bin/python3
"""OpenTelemetry profiles (OTLP v1.10.0) read with the classes protoc
generates from opentelemetry-proto's own files (tests/otlp, generated into
build/otlp_py by `make test-build`), never with ember's reader; and turned
into pprof the way Grafana Pyroscope's receiver does, for the real pprof to
read.

  otlp_read.py FILE [--pprof-dir DIR]

prints a JSON line per Profile: {"resource": {attribute: value},
"sample_type": [type, unit], "period_type": [type, unit], "period",
"time_ns", "duration_ns", "samples", "total", "frame_types": [...],
"stacks": {"root;...;leaf": weight}} where a stack's frames are the
functions' names, root first, behind the sample's process.executable.name
and thread.name attributes when it has them; with --pprof-dir, writes each
profile as DIR/NNNN.pb.gz and names it in "pprof".

Checks the specification's rules as it goes and fails (exit 1, the rule on
stderr) on any broken one: every dictionary table starts with its zero
value, indices are in range, a sample's values and timestamps agree in
number, timestamps fall within the profile's time.

Needs Debian's python3-protobuf (/usr/bin/python3).
"""
import gzip
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.environ.get("OTLP_PY", os.path.join(ROOT, "build", "otlp_py")))

from opentelemetry.proto.profiles.v1development import profiles_pb2  # noqa: E402
import profile_pb2  # noqa: E402  (pprof's profile.proto)


class Broken(Exception):
    pass


def check(ok, rule):
    if not ok:
        raise Broken(rule)


def any_value(v, strings):
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return v.string_value
    if kind == "int_value":
        return v.int_value
    if kind == "string_value_strindex":
        return strings[v.string_value_strindex]
    if kind == "array_value":
        return [any_value(x, strings) for x in v.array_value.values]
    if kind is None:
        return None
    return getattr(v, kind)


def parse(data):
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    msg = profiles_pb2.ProfilesData()
    msg.ParseFromString(data)
    return msg


def profiles(msg):
    """Yields (resource attributes, Profile, summary) for every profile."""
    d = msg.dictionary
    strings = list(d.string_table)
    check(strings and strings[0] == "", "string_table[0] must be \"\"")
    for name in ("mapping_table", "location_table", "function_table", "link_table", "attribute_table", "stack_table"):
        table = getattr(d, name)
        check(len(table) > 0 and table[0].ByteSize() == 0, name + "[0] must be the zero value")

    def at(table, i, what):
        check(0 <= i < len(table), "%s index %d out of range (%d)" % (what, i, len(table)))
        return table[i]

    def attributes(indices):
        out = {}
        for i in indices:
            a = at(d.attribute_table, i, "attribute")
            key = at(strings, a.key_strindex, "string")
            check(key not in out, "attribute key %s twice in one set" % key)
            out[key] = any_value(a.value, strings)
        return out

    for rp in msg.resource_profiles:
        resource = {kv.key: any_value(kv.value, strings) for kv in rp.resource.attributes}
        for sp in rp.scope_profiles:
            for p in sp.profiles:
                summary = {
                    "resource": resource,
                    "scope": sp.scope.name,
                    "sample_type": [strings[p.sample_type.type_strindex], strings[p.sample_type.unit_strindex]],
                    "period_type": [strings[p.period_type.type_strindex], strings[p.period_type.unit_strindex]],
                    "period": p.period,
                    "time_ns": p.time_unix_nano,
                    "duration_ns": p.duration_nano,
                    "attributes": attributes(p.attribute_indices),
                    "samples": len(p.samples),
                }
                stacks, frame_types, total = {}, set(), 0
                for s in p.samples:
                    check(not (s.values and s.timestamps_unix_nano) or len(s.values) == len(s.timestamps_unix_nano),
                          "a sample's values and timestamps differ in number")
                    check(s.values or s.timestamps_unix_nano, "a sample without values or timestamps")
                    for t in s.timestamps_unix_nano:
                        check(p.time_unix_nano <= t < p.time_unix_nano + max(p.duration_nano, 1),
                              "timestamp %d outside the profile's time" % t)
                    weight = sum(s.values) if s.values else len(s.timestamps_unix_nano)
                    total += weight
                    attrs = attributes(s.attribute_indices)
                    names = []
                    for li in at(d.stack_table, s.stack_index, "stack").location_indices:
                        loc = at(d.location_table, li, "location")
                        at(d.mapping_table, loc.mapping_index, "mapping")
                        frame_types.update(str(v) for k, v in attributes(loc.attribute_indices).items()
                                           if k == "profile.frame.type")
                        for line in loc.lines:  # innermost first
                            fn = at(d.function_table, line.function_index, "function")
                            names.append(at(strings, fn.name_strindex, "string"))
                    names.reverse()
                    prefix = [str(attrs[k]) for k in ("process.executable.name", "thread.name") if k in attrs]
                    key = ";".join(prefix + names)
                    stacks[key] = stacks.get(key, 0) + weight
                summary.update(total=total, frame_types=sorted(frame_types), stacks=stacks)
                yield resource, p, summary


def to_pprof(msg, p):
    """The pprof Pyroscope's receiver makes of a Profile: its one sample
    type (samples/count every cpu/nanoseconds read as CPU time), a sample a
    stack whose value is its values' sum or its timestamps' count."""
    d = msg.dictionary
    strings = list(d.string_table)
    out = profile_pb2.Profile()
    table = {"": 0}
    out.string_table.append("")

    def s(text):
        if text not in table:
            table[text] = len(out.string_table)
            out.string_table.append(text)
        return table[text]

    stype = (strings[p.sample_type.type_strindex], strings[p.sample_type.unit_strindex])
    ptype = (strings[p.period_type.type_strindex], strings[p.period_type.unit_strindex])
    cpu = stype == ("samples", "count") and ptype == ("cpu", "nanoseconds") and p.period
    vt = out.sample_type.add()
    vt.type, vt.unit = (s("cpu"), s("nanoseconds")) if cpu else (s(stype[0]), s(stype[1]))
    if p.period:
        out.period_type.type, out.period_type.unit = s(ptype[0]), s(ptype[1])
        out.period = p.period
    out.time_nanos, out.duration_nanos = p.time_unix_nano, p.duration_nano
    for i, m in enumerate(d.mapping_table[1:], 1):
        pm = out.mapping.add()
        pm.id, pm.filename = i, s(strings[m.filename_strindex])
    for i, f in enumerate(d.function_table[1:], 1):
        pf = out.function.add()
        pf.id, pf.name, pf.system_name = i, s(strings[f.name_strindex]), s(strings[f.system_name_strindex])
    for i, loc in enumerate(d.location_table[1:], 1):
        pl = out.location.add()
        pl.id, pl.mapping_id = i, loc.mapping_index
        for line in loc.lines:
            pl.line.add().function_id = line.function_index
    for smp in p.samples:
        ps = out.sample.add()
        ps.location_id.extend(d.stack_table[smp.stack_index].location_indices)
        weight = sum(smp.values) if smp.values else len(smp.timestamps_unix_nano)
        ps.value.append(weight * p.period if cpu else weight)
        for i in smp.attribute_indices:
            a = d.attribute_table[i]
            label = ps.label.add()
            label.key = s(strings[a.key_strindex])
            v = any_value(a.value, strings)
            if isinstance(v, int):
                label.num = v
            else:
                label.str = s(str(v))
    return gzip.compress(out.SerializeToString())


def main():
    args = sys.argv[1:]
    pprof_dir = None
    if "--pprof-dir" in args:
        i = args.index("--pprof-dir")
        pprof_dir = args[i + 1]
        del args[i:i + 2]
        os.makedirs(pprof_dir, exist_ok=True)
    if len(args) != 1:
        sys.exit("usage: otlp_read.py FILE [--pprof-dir DIR]")
    try:
        msg = parse(open(args[0], "rb").read())
        for n, (_, p, summary) in enumerate(profiles(msg)):
            if pprof_dir:
                path = os.path.join(pprof_dir, "%04d.pb.gz" % n)
                open(path, "wb").write(to_pprof(msg, p))
                summary["pprof"] = path
            print(json.dumps(summary, sort_keys=True))
    except Broken as e:
        sys.exit("otlp_read: %s: %s" % (args[0], e))


if __name__ == "__main__":
    main()
