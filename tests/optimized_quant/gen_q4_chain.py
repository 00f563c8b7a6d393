#!/usr/bin/python3
"""Writes the 4w / 8w / 8da4w / int8-dynamic programs tests/optimized_quant/test_q4_chain.c
loads, with PyTorch's outputs of the quantized models and the chained calls the runtime is
expected to form.

Usage: gen_q4_chain.py OUTPUT_DIR/q4_chain_cases.h   (CMake runs it at build time; nothing
generated is committed). Beside the header: NAME.pte, NAME.in.bin (the input: float32, or
int64 token ids) and NAME.out.bin (PyTorch's output of etch.quantize's model, float32).

Each linear of a 4w model is embedding_4bit -> [slice_copy when padded] -> permute_copy ->
mm | addmm (python/etch/quant/README.md); `chains` lists, in instruction order, the length of
each run the optimized embedding_4bit's chain function takes (src/kernels/optimized/
quant_linear.c): 3 without padding, 4 with it. The 8w cases (names starting "w8_"): each
linear dequantize_per_channel -> permute_copy -> mm | addmm, chains of 3. The 8da4w ("a8_")
and int8-dynamic ("d8_") cases: choose_qparams_per_token_asymmetric -> quantize_per_token ->
dequantize_per_token in front of the 4w / 8w chain, taken by the chain function of
choose_qparams (3 calls more).
"""

import os
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "python"))

import etch  # noqa: E402

nn = torch.nn


class EmbMLP(nn.Module):
    """A token embedding (vocab 50, widths[0] columns), then MLP's linears."""

    def __init__(self, widths, bias):
        super().__init__()
        self.emb = nn.Embedding(50, widths[0])
        self.mlp = MLP(widths, bias)

    def forward(self, ids):
        return self.mlp(self.emb(ids))


class MLP(nn.Module):
    """Linears of the given widths, relu between them (fused into the mm at load)."""

    def __init__(self, widths, bias):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias)
                                    for a, b in zip(widths[:-1], widths[1:]))

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i + 1 < len(self.layers):
                x = torch.relu(x)
        return x


# name, widths, bias, M (rows of x), options of etch.quantize
CASES = [
    # K = 40 padded to 64 (chain of 4), then K = 64 (chain of 3); float16 scales
    ("bias_g32_pad", [40, 64, 24], True, 3, dict(group_size=32, pad=True)),
    # no bias: mm; K = 96 padded to 128 for the second; float32 scales
    ("nobias_g64", [128, 96, 40], False, 2,
     dict(group_size=64, pad=True, scale_dtype=torch.float32)),
    # zero points (asymmetric), single-token decode (M = 1), 48 padded to 128
    ("asym_g128_m1", [256, 48, 256], True, 1, dict(group_size=128, pad=True, symmetric=False)),
    # group 256, more rows than the kernel's 4-row block, N not a multiple of 16
    ("g256_m7", [512, 72], True, 7, dict(group_size=256)),
    # more rows than the int4 kernel takes (a long prefill): chained, run call by call
    ("m257_prefill", [64, 32], True, 257, dict(group_size=32)),
    # 8w: bias, odd widths (K tails of the kernels), several rows
    ("w8_bias_m3", [40, 70, 24], True, 3, dict()),
    # 8w: no bias (mm), single-token decode
    ("w8_nobias_m1", [256, 96, 33], False, 1, dict()),
    # 8w: more rows than the 4-row block, N not a multiple of 16
    ("w8_m9", [130, 72], True, 9, dict()),
    # 8w: a long prefill, run call by call
    ("w8_m257_prefill", [64, 32], True, 257, dict()),
    # 8da4w: the per-token activation chain in front of the 4w one (6 calls; 7 when padded)
    ("a8_g32_pad_m3", [40, 64, 24], True, 3, dict(group_size=32, pad=True)),
    ("a8_g128_m1", [256, 96], False, 1, dict(group_size=128, pad=True)),
    # int8-dynamic: the activation chain in front of the 8w one (6 calls)
    ("d8_m5", [72, 130, 40], True, 5, dict()),
    ("d8_m1", [256, 64], False, 1, dict()),
    # 4w with a 4-bit token embedding in front (embedding_4bit with the input's indices: not a
    # chain, the optimized gather from the prepared scales, bitwise the portable kernel's)
    ("emb4_g32", [64, 40], True, 6, dict(group_size=32, pad=True, embedding="4,32")),
]


def scheme_of(name):
    return {"w8": "8w", "a8": "8da4w", "d8": "int8-dynamic"}.get(name[:2], "4w")


CHOOSE = "quantized_decomposed::choose_qparams_per_token_asymmetric.out"
FIRST_OP = {"4w": "quantized_decomposed::embedding_4bit.dtype_out",
            "8w": "quantized_decomposed::dequantize_per_channel.out",
            "8da4w": CHOOSE, "int8-dynamic": CHOOSE}


def chains_of(widths, group):
    if group is None:
        return [3] * (len(widths) - 1)
    return [3 if k % group == 0 else 4 for k in widths[:-1]]


def c_floats(path, tensors):
    with open(path, "wb") as f:
        for t in tensors:
            t = t.detach().to(torch.float32).contiguous()
            f.write(struct.pack("<%df" % t.numel(), *t.reshape(-1).tolist()))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: gen_q4_chain.py OUTPUT_DIR/q4_chain_cases.h")
    out_h = sys.argv[1]
    outdir = os.path.dirname(os.path.abspath(out_h))
    os.makedirs(outdir, exist_ok=True)
    torch.manual_seed(17)
    lines = ["/* Generated by tests/optimized_quant/gen_q4_chain.py: do not edit. */",
             "#ifndef ETCH_TEST_Q4_CHAIN_CASES_H", "#define ETCH_TEST_Q4_CHAIN_CASES_H", "",
             "#include <stdint.h>", "",
             "#define Q4_MAX_RUNS 4", "",
             "typedef struct q4_case {",
             "    const char *name;",
             "    int64_t in_numel, out_numel;",
             "    int nchains;",
             "    int chains[Q4_MAX_RUNS]; /* the length of each run, in order */",
             "    const char *first_op; /* the operator whose kernel takes each run */",
             "} q4_case;", "",
             "static const q4_case CASES[] = {"]
    for name, widths, bias, M, opts in CASES:
        if name.startswith("emb4"):
            model = EmbMLP(widths, bias).eval()
            x = torch.randint(0, 50, (M,))
        else:
            model = MLP(widths, bias).eval()
            x = torch.randn(M, widths[0])
        scheme = scheme_of(name)
        q = etch.quantize(model, (x,), scheme, **opts)
        with torch.no_grad():
            y = q(x)
        program = etch.export(q, (x,), check_ops=False)
        with open(os.path.join(outdir, name + ".pte"), "wb") as f:
            f.write(program.buffer)
        if x.dtype == torch.int64:  # the input's own bytes (the C test copies them as is)
            with open(os.path.join(outdir, name + ".in.bin"), "wb") as f:
                f.write(struct.pack("<%dq" % x.numel(), *x.reshape(-1).tolist()))
        else:
            c_floats(os.path.join(outdir, name + ".in.bin"), [x])
        c_floats(os.path.join(outdir, name + ".out.bin"), [y])
        chains = chains_of(widths, opts.get("group_size"))
        if scheme in ("8da4w", "int8-dynamic"):  # choose_qparams, quantize, dequantize
            chains = [c + 3 for c in chains]
        lines.append('    {"%s", %d, %d, %d, {%s}, "%s"},' % (
            name, x.numel(), y.numel(), len(chains), ", ".join(str(c) for c in chains),
            FIRST_OP[scheme]))
    lines += ["};", "", "#endif", ""]
    with open(out_h, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
