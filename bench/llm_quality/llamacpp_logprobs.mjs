// Next-token log-probabilities from llama.cpp (node-llama-cpp's prebuilt CPU library) for
// given token windows: the llama.cpp side of llm_ppl.py.
//
//   node llamacpp_logprobs.mjs --model M.gguf --windows W.json --node-modules DIR [--threads T]
//
// W.json: {"windows": [[id, id, ...], ...]}. Each window is evaluated on a fresh sequence (KV
// cache cleared) in one batch with LlamaContextSequence.controlledEvaluate, every position
// asking for the next token's probabilities (generateNext.probabilities at temperature 0: the
// greedy sampler selects without changing the logits, so node-llama-cpp's addon returns
// softmax(logits) over the whole vocabulary). Prints ONE JSON line:
//   {"engine":"llama.cpp", "node_llama_cpp", "llama_cpp_release", "ggml_cpu_variant",
//    "kv_cache_types", "logprobs": [[log p(w[1] | w[..0]), ..., log p(w[n-1] | w[..n-2])], ...]}
// The KV cache is F32 (node-llama-cpp's default is F16), flash attention off, as
// bench/llm/llamacpp_bench.mjs runs it.

import fs from "node:fs";
import path from "node:path";
import process from "node:process";
import { pathToFileURL } from "node:url";

function fail(msg) {
    process.stderr.write(`llamacpp_logprobs: ${msg}\n`);
    process.exit(2);
}

function parseArgs(argv) {
    const o = { model: null, windows: null, nodeModules: null, threads: 1 };
    for (let i = 0; i < argv.length; i++) {
        const a = argv[i];
        if (i + 1 >= argv.length) fail(`${a} needs a value`);
        const v = argv[++i];
        if (a === "--model") o.model = v;
        else if (a === "--windows") o.windows = v;
        else if (a === "--node-modules") o.nodeModules = v;
        else if (a === "--threads") {
            if (!/^[1-9][0-9]*$/.test(v)) fail(`--threads: expected a positive integer, got '${v}'`);
            o.threads = Number(v);
        } else fail(`unknown argument '${a}'`);
    }
    for (const k of ["model", "windows", "nodeModules"])
        if (!o[k]) fail(`missing --${k.replace(/[A-Z]/g, (c) => "-" + c.toLowerCase())}`);
    if (!fs.existsSync(o.model)) fail(`no such model file: ${o.model}`);
    return o;
}

async function main() {
    const o = parseArgs(process.argv.slice(2));
    let spec;
    try {
        spec = JSON.parse(fs.readFileSync(o.windows, "utf8"));
    } catch (e) {
        fail(`${o.windows}: ${e.message}`);
    }
    const windows = spec.windows;
    if (!Array.isArray(windows) || windows.length === 0 ||
        !windows.every((w) => Array.isArray(w) && w.length >= 2 &&
                              w.every((t) => Number.isInteger(t) && t >= 0)))
        fail(`${o.windows}: "windows" must be a list of token id lists (2 ids or more each)`);
    const pkg = path.join(o.nodeModules, "node-llama-cpp", "package.json");
    if (!fs.existsSync(pkg)) fail(`node-llama-cpp is not installed in ${o.nodeModules}`);
    const version = JSON.parse(fs.readFileSync(pkg, "utf8")).version;
    const { getLlama, LlamaLogLevel } = await import(
        pathToFileURL(path.join(o.nodeModules, "node-llama-cpp", "dist", "index.js")).href);
    let log = "";
    const llama = await getLlama({
        gpu: false, build: "never", skipDownload: true, usePrebuiltBinaries: true,
        progressLogs: false, maxThreads: 0, logLevel: LlamaLogLevel.debug,
        logger: (level, message) => { log += message.endsWith("\n") ? message : message + "\n"; },
    });
    const model = await llama.loadModel({ modelPath: o.model, gpuLayers: 0, useMmap: true });
    const longest = Math.max(...windows.map((w) => w.length));
    const context = await model.createContext({
        contextSize: Math.max(longest, 16), batchSize: longest, sequences: 1,
        threads: { ideal: o.threads, min: o.threads }, flashAttention: false,
        experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
    });
    const seq = context.getSequence();
    const logprobs = [];
    for (const w of windows) {
        await seq.clearHistory();
        const input = w.slice(0, -1).map((t) => [t, { generateNext: { probabilities: true } }]);
        const res = await seq.controlledEvaluate(input);
        const lp = [];
        for (let i = 0; i < input.length; i++) {
            const probs = res[i] && res[i].next && res[i].next.probabilities;
            if (!probs) fail(`no probabilities returned for position ${i}`);
            const p = probs.get(w[i + 1]);
            lp.push(p > 0 ? Math.log(p) : -Infinity);
        }
        logprobs.push(lp);
    }
    const m = /loaded CPU backend from (\S+)/.exec(log);
    const variant = m ? ((/libggml-cpu-([A-Za-z0-9_]+)\.so/.exec(m[1]) || [])[1] || m[1]) : "unknown";
    const out = {
        engine: "llama.cpp", node_llama_cpp: version, llama_cpp_release: llama.llamaCppRelease,
        ggml_cpu_variant: variant, kv_cache_types: [context.kvCacheKeyType, context.kvCacheValueType],
        // JSON has no -Infinity: a probability that underflowed to 0 is reported as null
        logprobs: logprobs.map((l) => l.map((v) => (Number.isFinite(v) ? v : null))),
    };
    seq.dispose();
    await context.dispose();
    await model.dispose();
    await llama.dispose();
    process.stdout.write(JSON.stringify(out) + "\n");
}

main().catch((e) => {
    process.stderr.write(`llamacpp_logprobs: ${e && e.stack ? e.stack : e}\n`);
    process.exit(1);
});
