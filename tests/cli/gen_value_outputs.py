"""A program whose outputs are not only tensors (tests/cli): the parameter-name Strings of
ExecuTorch's training programs, and Int, Double and Bool values.

    gen_value_outputs.py OUT.pte

Method `forward(x: Float[3]) -> (x + x, "linear.weight", "naïve ✓", "", 7, 2.5, True)`;
the expected .npy files (np.save of the same values) are checked by run_cli_tests.sh.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "python"))

from etch.serialize import ProgramBuilder, ScalarType, serialize_program  # noqa: E402

STRINGS = ["linear.weight", "na\u00efve \u2713", ""]


def main() -> None:
    pb = ProgramBuilder()
    m = pb.method("forward")
    x = m.tensor(ScalarType.FLOAT, [3])
    out = m.tensor(ScalarType.FLOAT, [3])
    m.kernel("aten::add.out", [x, x, m.int(1), out, out])
    m.inputs = [x]
    m.outputs = [out] + [m.string(s) for s in STRINGS] + [m.int(7), m.double(2.5), m.bool(True)]
    program, data = pb.build()
    os.makedirs(os.path.dirname(os.path.abspath(sys.argv[1])), exist_ok=True)
    with open(sys.argv[1], "wb") as f:
        f.write(serialize_program(program, data))


if __name__ == "__main__":
    main()
