// llama.cpp side of the etch LLM benchmark, through node-llama-cpp's prebuilt CPU library.
//
//   node llamacpp_bench.mjs --model M.gguf --prompt-ids 1,2,3 --new-tokens N
//                           [--threads T] [--context C] [--repeat R] [--node-modules DIR]
//
// Loads the GGUF on the CPU (gpu: false, no build, no download), evaluates the given prompt
// ids in one batch (prefill), then decodes N tokens greedily (temperature 0, EOS ignored: the
// evaluation simply continues) and prints ONE JSON line on stdout:
//   {"engine":"llama.cpp", "ggml_cpu_variant":"haswell", "ggml_cpu_library":".../libggml-cpu-
//    haswell.so", "threads":T, "load_ms", "runs":[{"prompt_tokens","generated_tokens",
//    "prefill_ms","ttft_ms","decode_ms","prefill_tok_s","decode_tok_s","tokens":[...],
//    "llama_perf":{...}}], "peak_rss_bytes"...}
// Times are wall clock around the evaluation calls (performance.now()):
//   prefill_ms / ttft_ms: from the start of the evaluation to the first generated token (the
//     prompt's batch plus sampling one token; llama.cpp computes logits of the last prompt
//     position only);
//   decode_ms: from the first generated token to the last; decode_tok_s = (N - 1) / decode_ms.
// llama.cpp's own counters (llama_perf_context_print: "prompt eval time", "eval time") are
// captured from its log and reported as llama_perf when present.
// The ggml CPU variant is the libggml-cpu-*.so that ggml's backend loader picked (logged as
// "load_backend: loaded CPU backend from ..."), cross-checked against the mapped libraries in
// /proc/self/maps.
// With --repeat R, the model is loaded once and the prompt + decode is run R times, each on a
// fresh sequence (the KV cache cleared).

import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

function usage(msg) {
    if (msg) process.stderr.write(`llamacpp_bench: ${msg}\n`);
    process.stderr.write(
        "usage: node llamacpp_bench.mjs --model M.gguf --prompt-ids 1,2,3 --new-tokens N\n" +
        "       [--threads T] [--context C] [--repeat R] [--node-modules DIR]\n");
    process.exit(2);
}

function parseArgs(argv) {
    const o = { threads: 1, context: 0, repeat: 1, newTokens: -1, promptIds: null, model: null,
                nodeModules: null };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        const val = () => {
            if (i + 1 >= argv.length) usage(`${a} needs a value`);
            return argv[++i];
        };
        const int = (name, s, min) => {
            if (!/^[0-9]+$/.test(s)) usage(`${name}: expected an integer, got '${s}'`);
            const v = Number(s);
            if (v < min || v > 1e7) usage(`${name}: ${v} out of range (>= ${min})`);
            return v;
        };
        if (a === "--model") o.model = val();
        else if (a === "--prompt-ids") {
            const s = val();
            o.promptIds = s.split(",").filter((x) => x.trim() !== "")
                .map((x) => int("--prompt-ids", x.trim(), 0));
        } else if (a === "--new-tokens") o.newTokens = int(a, val(), 1);
        else if (a === "--threads") o.threads = int(a, val(), 1);
        else if (a === "--context") o.context = int(a, val(), 0);
        else if (a === "--repeat") o.repeat = int(a, val(), 1);
        else if (a === "--node-modules") o.nodeModules = val();
        else if (a === "-h" || a === "--help") usage();
        else usage(`unknown argument '${a}'`);
    }
    if (!o.model) usage("missing --model");
    if (!o.promptIds || o.promptIds.length === 0) usage("missing --prompt-ids");
    if (o.newTokens < 1) usage("missing --new-tokens");
    if (!fs.existsSync(o.model)) usage(`no such model file: ${o.model}`);
    return o;
}

async function importNodeLlamaCpp(dir) {
    // node_modules beside this script, or the one given (the test installs into its build dir)
    const base = dir ? path.resolve(dir) : path.join(path.dirname(new URL(import.meta.url).pathname),
                                                     "node_modules");
    const pkg = path.join(base, "node-llama-cpp", "package.json");
    if (!fs.existsSync(pkg)) {
        process.stderr.write(`llamacpp_bench: node-llama-cpp is not installed in ${base} ` +
                             "(run `npm ci --omit=optional --ignore-scripts` in bench/llm)\n");
        process.exit(1);
    }
    const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
    const mod = await import(pathToFileURL(path.join(base, "node-llama-cpp", "dist", "index.js")).href);
    return { mod, version };
}

function peakRssBytes() {
    // VmHWM of this process (node + llama.cpp); the driver also measures it from wait4
    try {
        const m = /VmHWM:\s+(\d+) kB/.exec(fs.readFileSync("/proc/self/status", "utf8"));
        return m ? Number(m[1]) * 1024 : 0;
    } catch {
        return 0;
    }
}

function mappedCpuLibraries() {
    try {
        const libs = new Set();
        for (const line of fs.readFileSync("/proc/self/maps", "utf8").split("\n")) {
            const m = /(\S*libggml-cpu[^/\s]*\.so)\s*$/.exec(line);
            if (m) libs.add(m[1]);
        }
        return [...libs];
    } catch {
        return [];
    }
}

function parsePerf(log) {
    // llama_perf_context_print: prompt eval time = X ms / N tokens ( ... )
    //                           eval time = X ms / N runs ( ... )
    const perf = {};
    const pe = /prompt eval time\s*=\s*([0-9.]+) ms\s*\/\s*(\d+) tokens/.exec(log);
    if (pe) { perf.prompt_eval_ms = Number(pe[1]); perf.prompt_eval_tokens = Number(pe[2]); }
    const ev = /(?<!prompt )eval time\s*=\s*([0-9.]+) ms\s*\/\s*(\d+) runs/.exec(log);
    if (ev) { perf.eval_ms = Number(ev[1]); perf.eval_runs = Number(ev[2]); }
    return perf;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    const { mod, version } = await importNodeLlamaCpp(o.nodeModules);
    const { getLlama, LlamaLogLevel } = mod;
    let log = "";
    const t0 = performance.now();
    const llama = await getLlama({
        gpu: false,
        build: "never",
        skipDownload: true,
        usePrebuiltBinaries: true,
        progressLogs: false,
        maxThreads: 0,           // the context's thread count is used as given
        logLevel: LlamaLogLevel.debug,
        logger: (level, message) => { log += message.endsWith("\n") ? message : message + "\n"; },
    });
    const tLib = performance.now();
    const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0, useMmap: true });
    const contextSize = o.context || Math.max(o.promptIds.length + o.newTokens, 16);
    if (o.promptIds.length + o.newTokens > contextSize)
        usage(`prompt (${o.promptIds.length}) + new tokens (${o.newTokens}) exceed the context ` +
              `(${contextSize})`);
    const context = await model.createContext({
        contextSize, batchSize: Math.max(o.promptIds.length, 1), sequences: 1,
        threads: { ideal: o.threads, min: o.threads }, flashAttention: false,
        performanceTracking: true,
        // fp32 throughout, as etch: the KV cache too (node-llama-cpp defaults to F16)
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const loadMs = performance.now() - t0;
    const runs = [];
    for (let r = 0; r < o.repeat; r++) {
        const seq = context.getSequence();
        await seq.clearHistory();
        const before = log.length;
        const tokens = [];
        let tFirst = 0;
        const tStart = performance.now();
        const gen = seq.evaluate(o.promptIds, { temperature: 0 });
        for await (const tok of gen) {
            if (tokens.length === 0) tFirst = performance.now();
            tokens.push(tok);
            if (tokens.length >= o.newTokens) break;
        }
        const tEnd = performance.now();
        await context.printTimings();
        seq.dispose();
        const prefillMs = tFirst - tStart;
        const decodeMs = tEnd - tFirst;
        runs.push({
            prompt_tokens: o.promptIds.length,
            generated_tokens: tokens.length,
            prefill_ms: prefillMs,
            ttft_ms: prefillMs,
            decode_ms: decodeMs,
            prefill_tok_s: o.promptIds.length / (prefillMs / 1000),
            decode_tok_s: tokens.length > 1 ? (tokens.length - 1) / (decodeMs / 1000) : null,
            tokens,
            llama_perf: parsePerf(log.slice(before)),
        });
    }
    // which CPU backend variant did ggml load?
    const m = /loaded CPU backend from (\S+)/.exec(log);
    const mapped = mappedCpuLibraries();
    const lib = m ? m[1] : (mapped[0] || "");
    const variant = (/libggml-cpu-([A-Za-z0-9_]+)\.so/.exec(lib) || [])[1] ||
                    (lib ? path.basename(lib) : "unknown");
    const out = {
        engine: "llama.cpp",
        node_llama_cpp: version,
        llama_cpp_release: llama.llamaCppRelease,
        build_type: llama.buildType,
        ggml_cpu_variant: variant,
        ggml_cpu_library: lib,
        ggml_cpu_libraries_mapped: mapped,
        system_info: llama.systemInfo,
        threads: o.threads,
        context_threads: context.currentThreads,
        context_size: context.contextSize,
        kv_cache_types: [context.kvCacheKeyType, context.kvCacheValueType],
        load_ms: loadMs,
        load_library_ms: tLib - t0,
        runs,
        peak_rss_bytes: peakRssBytes(),
    };
    await context.dispose();
    await model.dispose();
    await llama.dispose();
    if (process.env.LLAMACPP_BENCH_LOG) fs.writeFileSync(process.env.LLAMACPP_BENCH_LOG, log);
    process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
    process.stderr.write(`llamacpp_bench: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
});
