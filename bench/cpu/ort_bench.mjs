// ONNX Runtime side of the etch CPU benchmark: load an .onnx model with N intra-op threads,
// run it on one .npy input (warmup + K timed iterations), print ONE JSON line:
//   {"engine":"ort","model":...,"threads":N,"warmup":W,"iterations":K,"load_ms":...,
//    "times_ms":[...],"median_ms":...,"min_ms":...,"max_ms":...,"ort_version":...}
//
//   node ort_bench.mjs --model M.onnx --input X.npy [--threads N] [--warmup W]
//                      [--iterations K] [--output Y.npy]
//
// --output writes the first output of the last run as a float32 .npy (for the correctness
// check). Exit status: 0 success, 1 failure, 2 bad usage.

import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import { createRequire } from 'node:module';
import ort from 'onnxruntime-node';

const USAGE = 'usage: node ort_bench.mjs --model M.onnx --input X.npy [--threads N] ' +
  '[--warmup W] [--iterations K] [--output Y.npy]';

function usage(msg) {
  process.stderr.write(`ort_bench: ${msg}\n${USAGE}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { threads: 1, warmup: 3, iterations: 10, model: null, input: null, output: null };
  const ints = { '--threads': ['threads', 1], '--warmup': ['warmup', 0], '--iterations': ['iterations', 1] };
  const strs = { '--model': 'model', '--input': 'input', '--output': 'output' };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '-h' || a === '--help') {
      process.stdout.write(USAGE + '\n');
      process.exit(0);
    }
    if (!(a in ints) && !(a in strs)) usage(`unknown argument '${a}'`);
    if (i + 1 >= argv.length) usage(`${a} needs a value`);
    const v = argv[++i];
    if (a in ints) {
      const [key, min] = ints[a];
      if (!/^[0-9]+$/.test(v) || Number(v) < min || Number(v) > 1e7) {
        usage(`${a} must be an integer >= ${min}, got '${v}'`);
      }
      opts[key] = Number(v);
    } else {
      opts[strs[a]] = v;
    }
  }
  if (!opts.model) usage('--model is required');
  if (!opts.input) usage('--input is required');
  return opts;
}

// .npy (versions 1-3): little-endian float32, C order only, which is what models.py writes.
function readNpy(path) {
  if (!existsSync(path)) throw new Error(`${path}: no such file`);
  const buf = readFileSync(path);
  const magic = Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59]);
  if (buf.length < 10 || !buf.subarray(0, 6).equals(magic)) throw new Error(`${path}: not a .npy file`);
  const major = buf[6];
  let hlen;
  let off;
  if (major === 1) {
    hlen = buf.readUInt16LE(8);
    off = 10;
  } else if (major === 2 || major === 3) {
    if (buf.length < 12) throw new Error(`${path}: truncated header`);
    hlen = buf.readUInt32LE(8);
    off = 12;
  } else {
    throw new Error(`${path}: unsupported .npy version ${major}`);
  }
  if (off + hlen > buf.length) throw new Error(`${path}: truncated header`);
  const header = buf.subarray(off, off + hlen).toString('latin1');
  const descr = /'descr'\s*:\s*'([^']*)'/.exec(header);
  const fortran = /'fortran_order'\s*:\s*(True|False)/.exec(header);
  const shape = /'shape'\s*:\s*\(([^)]*)\)/.exec(header);
  if (!descr || !fortran || !shape) throw new Error(`${path}: malformed header ${header.trim()}`);
  if (descr[1] !== '<f4') throw new Error(`${path}: dtype ${descr[1]}, only float32 ('<f4') is supported`);
  if (fortran[1] === 'True') throw new Error(`${path}: Fortran order is not supported`);
  const dims = shape[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  if (dims.some((d) => !Number.isInteger(d) || d < 0)) throw new Error(`${path}: bad shape (${shape[1]})`);
  const n = dims.reduce((a, b) => a * b, 1);
  const start = off + hlen;
  if (buf.length - start !== n * 4) {
    throw new Error(`${path}: ${buf.length - start} data bytes for ${n} float32 values`);
  }
  const data = new Float32Array(n);
  for (let i = 0; i < n; i++) data[i] = buf.readFloatLE(start + 4 * i);
  return { dims, data };
}

function writeNpy(path, dims, data) {
  const shape = dims.length === 1 ? `(${dims[0]},)` : `(${dims.join(', ')})`;
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': ${shape}, }`;
  const pad = 64 - ((10 + header.length + 1) % 64);
  header += ' '.repeat(pad % 64) + '\n';
  const pre = Buffer.alloc(10);
  Buffer.from([0x93, 0x4e, 0x55, 0x4d, 0x50, 0x59, 1, 0]).copy(pre);
  pre.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(data.length * 4);
  for (let i = 0; i < data.length; i++) body.writeFloatLE(data[i], 4 * i);
  writeFileSync(path, Buffer.concat([pre, Buffer.from(header, 'latin1'), body]));
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

function ortVersion() {
  try {
    const require = createRequire(import.meta.url);
    return require('onnxruntime-node/package.json').version;
  } catch {
    return ort.env?.versions?.node ?? null;
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  if (!existsSync(opts.model)) throw new Error(`${opts.model}: no such file`);
  const x = readNpy(opts.input);
  const t0 = process.hrtime.bigint();
  const session = await ort.InferenceSession.create(opts.model, {
    executionProviders: ['cpu'],
    intraOpNumThreads: opts.threads,
    interOpNumThreads: 1,
    graphOptimizationLevel: 'all',
    executionMode: 'sequential',
  });
  const loadMs = Number(process.hrtime.bigint() - t0) / 1e6;
  if (session.inputNames.length !== 1) {
    throw new Error(`${opts.model}: expects ${session.inputNames.length} inputs, this script feeds one`);
  }
  const feeds = { [session.inputNames[0]]: new ort.Tensor('float32', x.data, x.dims) };
  let out = null;
  for (let i = 0; i < opts.warmup; i++) out = await session.run(feeds);
  const times = [];
  for (let i = 0; i < opts.iterations; i++) {
    const s = process.hrtime.bigint();
    out = await session.run(feeds);
    times.push(Number(process.hrtime.bigint() - s) / 1e6);
  }
  if (opts.output) {
    const y = out[session.outputNames[0]];
    if (y.type !== 'float32') throw new Error(`output is ${y.type}, expected float32`);
    writeNpy(opts.output, y.dims, y.data);
  }
  const res = {
    engine: 'ort', model: opts.model, threads: opts.threads, warmup: opts.warmup,
    iterations: opts.iterations, load_ms: loadMs, times_ms: times,
    median_ms: median(times), min_ms: Math.min(...times), max_ms: Math.max(...times),
    peak_rss_kb: process.resourceUsage().maxRSS,
    ort_version: ortVersion(), node_version: process.versions.node,
  };
  process.stdout.write(JSON.stringify(res) + '\n');
  await session.release?.();
}

main().catch((e) => {
  process.stderr.write(`ort_bench: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
