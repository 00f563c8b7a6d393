"""Tests of etch.serialize: fixtures round-trip, hand-made programs round-trip, layout rules."""

import dataclasses
import math
import struct
import unittest

import support
from etch.serialize import (Bool, BoolList, Builder, BundledProgram, DataLocation, Double,
                            DoubleList, EValue, ExtendedHeader, FlatbufferError,
                            IncompatibleVersionError, Int, IntList, NotAProgramError, Null,
                            OptionalTensorList, Program, ProgramBuilder, PtdEntry, PteFile,
                            PteFormatError, ScalarType, SerializeConfig, String, Table, Tensor,
                            TensorList, TensorShapeDynamism, bundled, fbs, identify, read_bpte,
                            read_ptd, read_pte, serialize_program, serialize_ptd, unpack_program,
                            unpack_ptd, write_bpte, write_ptd, write_pte)
from etch.serialize import ptd as ptd_mod
from etch.serialize.flatbuffers import root_table


def f32(*vals):
    return struct.pack("<%df" % len(vals), *vals)


def needs_fixtures(test):
    return unittest.skipUnless(support.fixture_names(".pte"), "fixtures not found")(test)


class FlatbufferBuilderTest(unittest.TestCase):
    def test_table_scalars_strings_vectors(self):
        b = Builder(16)  # small start: exercises growth
        s = b.create_string("héllo")
        v = b.create_scalar_vector("q", [1, -2, 3])
        raw = b.create_bytes_vector(b"\x01\x02\x03", alignment=16)
        b.start_table()
        b.add_scalar(0, "I", 7, 0)
        b.add_scalar(1, "b", 0, 0)  # default: omitted
        b.add_offset(2, s)
        b.add_offset(3, v)
        b.add_offset(5, raw)
        b.add_scalar(6, "d", -0.0, 0.0)  # -0.0 is not the default bit pattern
        root = b.end_table()
        buf = b.finish(root, b"TEST")
        self.assertEqual(buf[4:8], b"TEST")
        self.assertEqual(len(buf) % 16, 0)
        t = root_table(buf, b"TEST")
        self.assertEqual(t.scalar(0, "I"), 7)
        self.assertFalse(t.has(1))
        self.assertEqual(t.scalar(1, "b", 42), 42)
        self.assertEqual(t.string(2), "héllo")
        self.assertEqual(t.scalar_vector(3, "q"), [1, -2, 3])
        self.assertIsNone(t.vector(4))
        self.assertEqual(t.bytes_vector(5), b"\x01\x02\x03")
        self.assertEqual(t.vector(5)[0] % 16, 0)  # force_align
        self.assertEqual(math.copysign(1, t.scalar(6, "d")), -1)
        self.assertFalse(t.has(40))  # beyond a short vtable: absent
        # string is NUL terminated
        p = t._deref(2)
        self.assertEqual(buf[p + 4 + len("héllo".encode()):][:1], b"\0")

    def test_vtables_are_shared(self):
        b = Builder()
        offs = []
        for i in range(5):
            b.start_table()
            b.add_scalar(0, "i", i + 1, 0)
            offs.append(b.end_table())
        vec = b.create_offset_vector(offs)
        b.start_table()
        b.add_offset(0, vec)
        buf = b.finish(b.end_table())
        t = root_table(buf)
        elems = t.table_vector(0)
        self.assertEqual([e.scalar(0, "i") for e in elems], [1, 2, 3, 4, 5])
        self.assertEqual(len({e._vt for e in elems}), 1)

    def test_reader_rejects_out_of_bounds(self):
        with self.assertRaises(FlatbufferError):
            root_table(b"\xff\x00\x00\x00ET12")
        with self.assertRaises(FlatbufferError):
            root_table(b"\x00" * 4, b"ET12")

    def test_union_and_null_member(self):
        ev = [EValue(Null()), EValue(Int(-5)), EValue(Bool(True)), EValue(Double(2.5)),
              EValue(String("x")), EValue(IntList([0, 1])), EValue(DoubleList([1.5, -2.0])),
              EValue(BoolList([True, False])), EValue(TensorList([3])),
              EValue(OptionalTensorList([-1, 3])), EValue(None)]
        for e in ev:
            self.assertEqual(fbs.decode(EValue, fbs.encode(e)), e)


class FixtureRoundTripTest(unittest.TestCase):
    """Every valid fixture reads, re-serializes, and reads back to an equal Program."""

    def _round_trip(self, name, data):
        pf = read_pte(data)
        for kw in ({}, {"keep_offsets": True}):
            out = write_pte(pf, **kw)
            again = read_pte(out)
            self.assertEqual(again.program, pf.program, (name, kw))
            self.assertEqual(again.segments, pf.segments, (name, kw))
            self.assertEqual(write_pte(again, **kw), out, "not deterministic: %s" % name)
            has_data = any(pf.segments)
            self.assertEqual(out[8:12] == b"eh00", has_data, name)
        # logical level: unpack -> serialize -> read -> unpack gives the same parts
        parts = unpack_program(pf)
        out = serialize_program(parts.program, parts.data, parts.config)
        again = read_pte(out)
        self.assertEqual(again.program, pf.program, name)
        parts2 = unpack_program(again)
        self.assertEqual(parts2.program, parts.program, name)
        self.assertEqual(parts2.data, parts.data, name)
        return pf

    @needs_fixtures
    def test_pte_fixtures(self):
        names = support.fixture_names(".pte")
        self.assertGreaterEqual(len(names), 4)
        for name in names:
            with self.subTest(name=name):
                self._round_trip(name, support.read_fixture(name))

    @needs_fixtures
    def test_bpte_fixtures(self):
        for name in support.fixture_names(".bpte"):
            with self.subTest(name=name):
                data = support.read_fixture(name)
                self.assertEqual(identify(data), "bpte")
                bp = read_bpte(data)
                out = write_bpte(bp)
                self.assertEqual(read_bpte(out), bp)
                self.assertEqual(len(out) % 32, 0)
                start = root_table(out).vector(2)[0]
                self.assertEqual(start % 32, 0)  # force_align: 32
                self._round_trip(name + ":program", bp.program)

    @needs_fixtures
    def test_ptd_fixture(self):
        data = support.read_fixture("addmul_external.ptd")
        pt = read_ptd(data)
        self.assertEqual([n.key for n in pt.flat_tensor.named_data], ["a", "b"])
        self.assertEqual(read_ptd(write_ptd(pt, keep_offsets=True)), pt)
        out = write_ptd(pt)
        again = read_ptd(out)
        self.assertEqual(again.segments, pt.segments)
        self.assertEqual(again.flat_tensor.named_data, pt.flat_tensor.named_data)
        self.assertEqual(again.header.segment_base_offset % 128, 0)
        entries = unpack_ptd(pt)
        self.assertEqual(unpack_ptd(read_ptd(serialize_ptd(entries))), entries)

    @needs_fixtures
    def test_invalid_fixtures(self):
        with self.assertRaises(IncompatibleVersionError):
            read_pte(support.read_fixture("legacy_et02.pte"))
        with self.assertRaises(NotAProgramError):
            read_pte(support.read_fixture("not_a_program.pte"))
        with self.assertRaises(PteFormatError):
            read_pte(b"\x00" * 4)

    @needs_fixtures
    def test_fixture_contents(self):
        pf = read_pte(support.read_fixture("add.pte"))
        self.assertIsNone(pf.header)
        plan = pf.program.execution_plan[0]
        self.assertEqual(plan.name, "forward")
        self.assertEqual(plan.inputs, [0, 1])
        self.assertEqual(plan.outputs, [2])
        self.assertEqual(plan.non_const_buffer_sizes, [0, 48])
        self.assertEqual([(o.name, o.overload) for o in plan.operators], [("aten::add", "out")])
        self.assertEqual(plan.chains[0].instructions[0].instr_args.args, [0, 1, 3, 2, 2])

        pf = read_pte(support.read_fixture("add_constant_segment.pte"))
        self.assertEqual(pf.header, ExtendedHeader(1040, 1152, 4, 32))
        self.assertEqual(pf.program.constant_segment.offsets, [0, 0])
        self.assertEqual(unpack_program(pf).data.constants, [b"", f32(1.0)])

        pf = read_pte(support.read_fixture("linear_constant_buffer.pte"))
        parts = unpack_program(pf)
        self.assertFalse(parts.config.constant_segment)
        self.assertEqual(parts.data.constants, [b"", f32(3, 3, 3, 3), f32(2, 2, 2, 2)])

        bp = read_bpte(support.read_fixture("bundled_add_mul.bpte"))
        inner = read_pte(bp.program)
        self.assertEqual(inner.header.length, 24)
        self.assertEqual(bp.version, 2)
        case = bp.method_test_suites[0].test_cases[0]
        self.assertEqual(case.expected_outputs[0].val.scalar_type, ScalarType.INT)


def handmade():
    """A two-method program that uses every value kind, instruction kind and data location."""
    pb = ProgramBuilder()
    m = pb.method("forward")
    w = m.tensor(ScalarType.FLOAT, [2, 2], constant=f32(1, 2, 3, 4))
    w2 = m.tensor(ScalarType.FLOAT, [3], constant=f32(5, 6, 7))
    x = m.tensor(ScalarType.FLOAT, [2, 2], dynamism=TensorShapeDynamism.DYNAMIC_BOUND)
    state = m.tensor(ScalarType.FLOAT, [2, 2], initial=f32(100, 200, 300, 400), fqn="state")
    out = m.tensor(ScalarType.FLOAT, [2, 2])
    ext = m.tensor(ScalarType.FLOAT, [2, 2], external="linear.weight")
    unbound = m.tensor(ScalarType.BYTE, [0], planned=False)
    i1 = m.int(1)
    m.null()
    m.string("hello")
    sizes = m.int_list([i1, i1])
    m.double_list([0.5, -1.25])
    m.bool_list([True, False, True])
    m.tensor_list([w, x])
    m.optional_tensor_list([w, -1, x])
    cond = m.bool(False)
    m.kernel("aten::add.out", [x, w, i1, out, out])
    m.kernel("aten::copy_", [state, out, m.bool(False), state])
    m.delegate("XnnpackBackend", b"blob-seg", [x, out], compile_specs=[("k", b"\x01\x02")])
    m.delegate("XnnpackBackend", b"blob-inline", [x, out], inline=True)
    m.delegate("OtherBackend", b"", [x, out], inline=True)
    m.jump_false(cond, m.pc + 2)
    m.move(out, x)
    m.free(unbound)
    m.inputs = [x]
    m.outputs = [out, sizes]
    del w2, ext
    c = pb.method("get_answer")
    c.outputs = [c.int(42), c.double(0.5), c.bool(True), c.string("torch.uint8")]
    pb.named("shared_weights", b"\x07" * 33, alignment=64)
    pb.named("alias", b"\x07" * 33)
    return pb


class HandMadeProgramTest(unittest.TestCase):
    def test_round_trip_and_layout(self):
        pb = handmade()
        program, data = pb.build()
        blob = pb.serialize()
        self.assertEqual(blob, handmade().serialize(), "byte-identical for identical input")
        self.assertEqual(blob[4:8], b"ET12")
        hdr = ExtendedHeader.parse(blob)
        self.assertEqual(hdr.length, 32)
        self.assertEqual(hdr.segment_base_offset % 128, 0)
        self.assertEqual(hdr.segment_base_offset, -(-hdr.program_size // 128) * 128)
        self.assertEqual(len(blob), hdr.segment_base_offset + hdr.segment_data_size)
        pf = read_pte(blob)
        p = pf.program
        # segments: constants, mutable, one delegate blob, one named blob (deduplicated)
        self.assertEqual(len(p.segments), 4)
        for s in p.segments:
            self.assertEqual(s.offset % 128, 0)
        self.assertEqual(p.segments[3].offset % 64, 0)
        self.assertEqual([n.segment_index for n in p.named_data], [3, 3])
        self.assertEqual(p.constant_segment.segment_index, 0)
        self.assertEqual(p.constant_segment.offsets, [0, 0, 16])
        self.assertEqual(pf.segments[0], f32(1, 2, 3, 4) + f32(5, 6, 7))
        self.assertEqual(p.mutable_data_segments[0].offsets, [0, 0])
        self.assertEqual(pf.segments[1], f32(100, 200, 300, 400))
        dels = p.execution_plan[0].delegates
        self.assertEqual([(d.processed.location, d.processed.index) for d in dels],
                         [(DataLocation.SEGMENT, 2), (DataLocation.INLINE, 0),
                          (DataLocation.INLINE, 1)])
        self.assertEqual([b.data for b in p.backend_delegate_data], [b"blob-inline", b""])
        # inline delegate data is 16-byte aligned inside the file
        t = root_table(blob)
        inl = t.table_vector(3)
        self.assertEqual(inl[0].vector(0)[0] % 16, 0)
        # the logical program comes back unchanged
        parts = unpack_program(pf)
        self.assertEqual(parts.program, program)
        self.assertEqual(parts.data.constants, data.constants)
        self.assertEqual(parts.data.mutable, data.mutable)
        self.assertEqual(parts.data.delegate_blobs, data.delegate_blobs)
        self.assertEqual([(n.key, n.data) for n in parts.data.named_data],
                         [(n.key, n.data) for n in data.named_data])
        self.assertEqual(parts.program.method("get_answer").outputs, [0, 1, 2, 3])

    def test_empty_delegate_blob_stays_inline(self):
        pb = ProgramBuilder()
        m = pb.method("forward")
        m.delegate("XnnpackBackend", b"", [])
        ref = read_pte(pb.serialize()).program.execution_plan[0].delegates[0].processed
        self.assertEqual((ref.location, ref.index), (DataLocation.INLINE, 0))

    def test_no_header_without_segment_data(self):
        pb = ProgramBuilder()
        m = pb.method("forward")
        a = m.tensor(ScalarType.FLOAT, [1])
        m.inputs = [a]
        m.outputs = [a]
        blob = pb.serialize()
        self.assertNotEqual(blob[8:12], b"eh00")
        pf = read_pte(blob)
        self.assertIsNone(pf.header)
        self.assertEqual([(s.offset, s.size) for s in pf.program.segments], [(0, 0)])
        self.assertEqual(pf.program.constant_segment.offsets, [0])

    def test_legacy_constant_buffer(self):
        pb = ProgramBuilder()
        m = pb.method("forward")
        m.outputs = [m.tensor(ScalarType.FLOAT, [3], constant=f32(1, 2, 3)),
                     m.tensor(ScalarType.FLOAT, [1], constant=f32(9))]
        blob = pb.serialize(SerializeConfig(constant_segment=False))
        self.assertNotEqual(blob[8:12], b"eh00")
        p = read_pte(blob).program
        self.assertEqual([b.storage for b in p.constant_buffer], [b"", f32(1, 2, 3), f32(9)])
        bufs = root_table(blob).table_vector(2)
        for b in bufs[1:]:
            self.assertEqual(b.vector(0)[0] % 16, 0)

    def test_constant_alignment_and_dedup(self):
        pb = ProgramBuilder()
        m = pb.method("forward")
        ids = [m.tensor(ScalarType.BYTE, [n], constant=bytes([n]) * n) for n in (1, 17, 3)]
        m.tensor(ScalarType.BYTE, [17], constant=bytes([17]) * 17)  # same bytes: shared
        m.outputs = ids
        program, data = pb.build()
        self.assertEqual(len(data.constants), 4)
        p = read_pte(pb.serialize(SerializeConfig(constant_tensor_alignment=32))).program
        self.assertEqual(p.constant_segment.offsets, [0, 0, 32, 64])
        self.assertEqual(p.segments[0].size, 67)

    def test_short_vtables_read_as_defaults(self):
        # A Program table with only slots 0-1 (an "old writer") reads with empty new fields.
        b = Builder()
        plan = fbs.encode_into(b, handmade().build()[0].execution_plan[1])
        vec = b.create_offset_vector([plan])
        b.start_table()
        b.add_offset(1, vec)
        blob = b.finish(b.end_table(), b"ET12")
        p = read_pte(blob).program
        self.assertEqual(p.mutable_data_segments, [])
        self.assertEqual(p.named_data, [])
        self.assertIsNone(p.constant_segment)
        self.assertEqual(p.execution_plan[0].name, "get_answer")

    def test_extended_header_24_bytes(self):
        pb = handmade()
        blob = bytearray(pb.serialize())
        struct.pack_into("<I", blob, 12, 24)  # an old header: no segment_data_size
        hdr = ExtendedHeader.parse(bytes(blob))
        self.assertEqual(hdr.segment_data_size, 0)
        pf = read_pte(bytes(blob))
        self.assertEqual(pf.program, read_pte(pb.serialize()).program)

    def test_truncated_file_is_refused(self):
        blob = handmade().serialize()
        with self.assertRaises(PteFormatError):
            read_pte(blob[:len(blob) - 10])


class BundledAndPtdTest(unittest.TestCase):
    def test_bundled_round_trip(self):
        program = handmade().serialize()
        bp = BundledProgram(
            version=2, program=program,
            method_test_suites=[bundled.BundledMethodTestSuite("forward", [
                bundled.BundledMethodTestCase(
                    inputs=[bundled.tensor_value(ScalarType.FLOAT, [2, 2], f32(1, 2, 3, 4)),
                            bundled.Value(bundled.Int(3)), bundled.Value(bundled.Bool(True)),
                            bundled.Value(bundled.Double(0.25))],
                    expected_outputs=[bundled.tensor_value(ScalarType.FLOAT, [2, 2],
                                                           f32(2, 4, 6, 8))])])])
        out = write_bpte(bp)
        self.assertEqual(out[4:8], b"BP08")
        self.assertEqual(read_bpte(out), bp)
        t = root_table(out)
        self.assertEqual(t.vector(2)[0] % 32, 0)
        self.assertEqual(read_pte(read_bpte(out).program).program,
                         read_pte(program).program)

    def test_ptd_round_trip(self):
        layout = ptd_mod.TensorLayout(ScalarType.FLOAT, [2, 2], [0, 1])
        entries = [PtdEntry("a", f32(1, 2, 3, 4), layout),
                   PtdEntry("b", f32(5, 6, 7, 8), layout),
                   PtdEntry("c", f32(1, 2, 3, 4), layout),  # same bytes as "a": shared
                   PtdEntry("blob", b"\x01\x02\x03", None, alignment=256)]
        out = serialize_ptd(entries)
        self.assertEqual(out[4:8], b"FT01")
        self.assertEqual(out[8:12], b"FH01")
        hdr = ptd_mod.FlatTensorHeader.parse(out)
        self.assertEqual((hdr.length, hdr.flatbuffer_offset), (40, 48))
        self.assertEqual(len(out), hdr.segment_base_offset + hdr.segment_data_size)
        pt = read_ptd(out)
        self.assertEqual(len(pt.segments), 3)
        self.assertEqual(pt.flat_tensor.segments[2].offset % 256, 0)
        got = unpack_ptd(pt)
        self.assertEqual([(e.key, e.data, e.layout) for e in got],
                         [(e.key, e.data, e.layout) for e in entries])
        self.assertEqual(serialize_ptd(entries), out)


class SchemaTest(unittest.TestCase):
    def test_slot_numbers_follow_declaration_order(self):
        lay = {name: slot for name, _, slot in fbs._layout(Tensor)}
        self.assertEqual(lay["data_buffer_idx"], 5)
        self.assertEqual(lay["extra_tensor_info"], 9)
        lay = {name: slot for name, _, slot in fbs._layout(Program)}
        self.assertEqual(lay["named_data"], 7)
        lay = {name: slot for name, _, slot in fbs._layout(EValue)}
        self.assertEqual(lay["val"], 0)  # tag slot 0, value slot 1

    def test_tensor_helpers(self):
        t = Tensor(scalar_type=ScalarType.HALF, sizes=[2, 3])
        self.assertEqual((t.numel, t.nbytes), (6, 12))
        self.assertEqual(dataclasses.replace(t, sizes=[]).numel, 1)


if __name__ == "__main__":
    unittest.main()
