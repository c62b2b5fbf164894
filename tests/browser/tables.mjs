// The flamegraph page's tables (flamegraph/html.h, data version 2), packed
// and unpacked here independently of the page and of ember (and a preview's,
// unpacked): make_fixture.mjs
// writes pages with them, the tests read pages back with them. Stacks are
// given and returned as the delta-coded array [prefix, n, f_1..f_n, weight, ...];
// a timeline as [ms since the entry before, stack, weight, ...]. A page
// packed without a timeline ends after its base stacks, as pages written
// before timelines do.
import { gunzipSync, gzipSync } from 'node:zlib';

export function packTables({ names, modules, frames, stacks, baseStacks = [], timeline }) {
  const bytes = [];
  const varint = (v) => {
    for (; v >= 128; v = Math.floor(v / 128)) bytes.push((v % 128) + 128);
    bytes.push(v);
  };
  const strings = (list) => {
    const utf8 = Buffer.from(list.map((s) => s + '\0').join(''), 'utf8');
    varint(list.length);
    varint(utf8.length);
    for (const b of utf8) bytes.push(b);
  };
  const stackList = (enc) => {
    let count = 0;
    for (let i = 0; i < enc.length; i += enc[i + 1] + 3) count++;
    varint(count);
    for (const v of enc) varint(v);
  };
  strings(names);
  strings(modules);
  varint(frames.length / 3);
  for (const v of frames) varint(v);
  stackList(stacks);
  stackList(baseStacks);
  if (timeline) {
    varint(timeline.length / 3);
    for (const v of timeline) varint(v);
  }
  return gzipSync(Buffer.from(bytes)).toString('base64');
}

// A reader of varints and string tables over the gunzipped bytes of base64.
function reader(base64) {
  const buf = gunzipSync(Buffer.from(base64, 'base64'));
  let at = 0;
  const varint = () => {
    let v = 0, scale = 1, b;
    do {
      if (at >= buf.length) throw new Error('tables cut short');
      b = buf[at++];
      v += (b & 127) * scale;
      scale *= 128;
    } while (b & 128);
    return v;
  };
  const strings = () => {
    const count = varint(), length = varint();
    const list = buf.subarray(at, at + length).toString('utf8').split('\0');
    at += length;
    list.pop();
    if (list.length !== count) throw new Error(`a string table of ${list.length} strings, not ${count}`);
    return list;
  };
  const done = () => at === buf.length;
  return { varint, strings, done };
}

export function unpackTables(base64) {
  const { varint, strings, done } = reader(base64);
  const stackList = () => {
    const out = [];
    for (let s = varint(); s > 0; s--) {
      const prefix = varint(), n = varint();
      out.push(prefix, n);
      for (let k = 0; k <= n; k++) out.push(varint());   // n ids, then the weight
    }
    return out;
  };
  const names = strings(), modules = strings();
  const frames = [];
  for (let f = varint() * 3; f > 0; f--) frames.push(varint());
  const stacks = stackList(), baseStacks = stackList();
  const timeline = [];
  for (let e = done() ? 0 : varint() * 3; e > 0; e--) timeline.push(varint());
  if (!done()) throw new Error('tables go on past their end');
  return { names, modules, frames, stacks, baseStacks, timeline };
}

// A preview's tables (flamegraph/html.h): its frames as above, then nodes
// ({ depth, frame, x, total }, x summed from each node's offset past its
// parent), the tree's depth, the kinds present and the number of stacks.
export function unpackPreview(base64) {
  const { varint, strings, done } = reader(base64);
  const names = strings(), modules = strings();
  const frames = [];
  for (let f = varint() * 3; f > 0; f--) frames.push(varint());
  const count = varint(), maxDepth = varint();
  const nodes = [], xAt = [0];
  for (let n = 0; n < count; n++) {
    const depth = varint(), frame = varint(), x = xAt[depth - 1] + varint(), total = varint();
    xAt[depth] = x;
    nodes.push({ depth, frame, x, total });
  }
  const kinds = [];
  for (let k = varint(); k > 0; k--) kinds.push(varint());
  const stacks = varint();
  if (!done()) throw new Error('preview tables go on past their end');
  return { names, modules, frames, nodes, maxDepth, kinds, stacks };
}
