"""Golden data for the XNNPACK fixtures: inputs and the outputs xnn_ref.py (torch) computes.

    python3 gen_golden.py FIXTURES_PTE_DIR OUT_DIR

writes OUT_DIR/<case>.in.f32 / <case>.out.f32 (raw little-endian float32) and OUT_DIR/cases.txt,
one line per case: name fixture tolerance input-dims... (dims of the single input).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import xnn_ref  # noqa: E402

# name, fixture, input shape, absolute tolerance. The quantized graph's output is int8 with
# scale 0.0054474: one step of it (rounding ties may land either side).
CASES = [
    ("add", "xnnpack_add_2023.pte", (1, 2, 3, 4), 0.0),
    ("clamp", "xnnpack_clamp5.pte", (5,), 0.0),
    ("quantized", "xnnpack_quantized.pte", (2, 8), 0.0055),
    ("cnn_28", "xnnpack_simple_cnn.pte", (1, 1, 28, 28), 1e-4),
    ("cnn_64x48", "xnnpack_simple_cnn.pte", (1, 1, 64, 48), 1e-4),
    ("cnn_5x7", "xnnpack_simple_cnn.pte", (1, 1, 5, 7), 1e-4),
]


def main():
    fixtures, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    rng = np.random.RandomState(1234)
    lines = []
    for name, fixture, shape, tol in CASES:
        x = (rng.randn(*shape) * 2).astype(np.float32)
        if name == "clamp":
            x = np.array([-3, -0.5, 0, 0.5, 3], np.float32)
        y = xnn_ref.run_program(os.path.join(fixtures, fixture), [x])[0].astype(np.float32)
        x.tofile(os.path.join(out, name + ".in.f32"))
        y.tofile(os.path.join(out, name + ".out.f32"))
        lines.append("%s %s %g %s" % (name, fixture, tol, " ".join(map(str, shape))))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
