"""The audio front end (etch/audio.h) against references, through etch.audio (libetch.so):

- features: torch.stft + torchaudio's mel / dB / DCT formulas (reference.py) on real speech
  (pocketsphinx-testdata, 16 kHz) and on noise, for several configurations;
- WAV: every encoding written here byte by byte, decoded against numpy; malformed files refused
  with the reason named;
- resampling: sox's `rate` on real recordings (8 kHz Asterisk prompts, 16 kHz pocketsphinx
  clips) and an analytic sine; the output never depends on how the input is cut into calls;
- streaming windows: equal to slices of the signal whatever the chunking.
"""
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import unittest
import wave

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import etch.audio as A  # noqa: E402
import reference as R  # noqa: E402

PS = "/usr/share/pocketsphinx/test/data"
ASTERISK = "/usr/share/asterisk/sounds/en_US_f_Allison"
SPEECH16 = [PS + "/cards/001.wav", PS + "/librivox/sense_and_sensibility_01_austen_64kb-0870.wav"]
SPEECH8 = [ASTERISK + "/digits/7.wav", ASTERISK + "/digits/20.wav"]


def read_wav(path):
    with wave.open(path) as w:
        assert w.getsampwidth() == 2 and w.getnchannels() == 1
        x = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float64) / 32768
        return x, w.getframerate()


def sox_rate(x, fi, fo):
    d = tempfile.mkdtemp()
    try:
        raw, out = os.path.join(d, "in.f32"), os.path.join(d, "out.f32")
        np.asarray(x, dtype="<f4").tofile(raw)
        fmt = ["-t", "raw", "-e", "floating-point", "-b", "32"]
        subprocess.run(["sox", "-V1"] + fmt + ["-r", str(fi), "-c", "1", raw] + fmt +
                       [out, "rate", "-v", str(fo)], check=True)
        return np.fromfile(out, dtype="<f4").astype(np.float64)
    finally:
        shutil.rmtree(d)


def snr_db(x, ref):
    n = min(len(x), len(ref))
    x, ref = np.asarray(x[:n], np.float64), np.asarray(ref[:n], np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / max(np.sum((x - ref) ** 2), 1e-300))


def lowpass(x, fs, edge):
    """Zero every FFT bin above `edge` Hz."""
    X = np.fft.rfft(x)
    X[np.fft.rfftfreq(len(x), 1.0 / fs) > edge] = 0
    return np.fft.irfft(X, len(x))


class Features(unittest.TestCase):
    CONFIGS = {
        # the keyword spotters' default
        "kws_default": {},
        # Whisper-like log-mel: centred, Slaney scale and norm, natural log, magnitude
        "logmel_slaney": dict(center=True, mel_scale="slaney", mel_norm_slaney=True, log="ln",
                              n_fft=400, win_length=400, hop_length=160, n_mels=80, f_min=0.0,
                              f_max=8000.0, n_mfcc=0, power=1.0),
        # Hamming window shorter than n_fft, pre-emphasis, unnormalised DCT, no floor
        "mfcc13_hamming": dict(n_fft=512, win_length=400, hop_length=160, window="hamming",
                               window_periodic=False, preemphasis=0.97, top_db=0.0, n_mfcc=13,
                               dct_ortho=False, f_min=0.0, f_max=8000.0, n_mels=26),
        # a prime FFT size (the plain-DFT radix) and an odd composite one
        "prime_fft": dict(n_fft=401, win_length=401, hop_length=200, n_mels=20, n_mfcc=0),
        "odd_fft": dict(n_fft=375, win_length=300, hop_length=125, n_mels=30, n_mfcc=12,
                        center=True),
    }

    def check(self, x, name, kw):
        cfg = A.features_config(**kw)
        got = A.compute_features(x.astype(np.float32), cfg)
        rkw = dict(kw)
        if "window" in rkw:
            rkw["window_kind"] = rkw.pop("window")
        ref = R.features(x.astype(np.float32).astype(np.float64), **rkw)
        self.assertEqual(got.shape, ref.shape, name)
        if kw.get("n_mfcc", 10) == 0 and kw.get("log", "db") != "none":
            # log-mel output: float32's spectrum is exact to ~1e-7 of the frame's energy, so
            # bins far below the peak carry rounding only: compared over the 90 dB (of power)
            # below it, 9 decades of a power spectrum or 4.5 of a magnitude one
            decades = 4.5 * kw.get("power", 2.0)
            span = 10 * decades if kw.get("log", "db") == "db" else decades * np.log(10)
            got = np.maximum(got, ref.max() - span)
            ref = np.maximum(ref, ref.max() - span)
        err = np.abs(got - ref).max()
        tol = 1e-3 + 2e-5 * np.abs(ref).max()
        self.assertLess(err, tol, "%s: max abs error %.3g (tolerance %.3g)" % (name, err, tol))
        return err

    def test_real_speech(self):
        for path in SPEECH16:
            x, fs = read_wav(path)
            self.assertEqual(fs, 16000)
            for name, kw in self.CONFIGS.items():
                with self.subTest(path=os.path.basename(path), config=name):
                    self.check(x[:48000], name, kw)

    def test_noise_and_silence(self):
        rng = np.random.default_rng(7)
        noise = rng.standard_normal(16000) * 0.1
        # a loud tone then digital silence: the 80 dB floor must bite
        tone = np.concatenate([0.5 * np.sin(2 * np.pi * 440 * np.arange(8000) / 16000),
                               np.zeros(8000)])
        for sig_name, x in [("noise", noise), ("tone_then_silence", tone)]:
            for name, kw in self.CONFIGS.items():
                with self.subTest(signal=sig_name, config=name):
                    self.check(x, name, kw)
        got = A.compute_features(tone.astype(np.float32), A.features_config(n_mfcc=0))
        self.assertAlmostEqual(float(got.min()), float(got.max()) - 80.0, places=3)

    def test_kws_shape(self):
        x, _ = read_wav(SPEECH16[0])
        got = A.compute_features(x[:16000].astype(np.float32), A.features_config())
        self.assertEqual(got.shape, (49, 10))
        # shorter than one frame: none, and asking for fewer frames gives fewer
        self.assertEqual(A.compute_features(np.zeros(639, np.float32), A.features_config()).shape[0], 0)
        self.assertEqual(A.compute_features(x[:16000].astype(np.float32), A.features_config(),
                                            max_frames=5).shape, (5, 10))

    def test_bad_configs(self):
        bad = [dict(n_fft=1), dict(win_length=700), dict(hop_length=0), dict(n_mels=400),
               dict(f_max=9000.0), dict(f_min=5000.0), dict(n_mfcc=41), dict(power=3.0),
               dict(log="none"), dict(log="ln", log_offset=0.0), dict(amin=0.0),
               dict(preemphasis=1.0), dict(sample_rate=0), dict(window=7)]
        for kw in bad:
            with self.subTest(config=kw):
                cfg = A.features_config(**{k: v for k, v in kw.items() if k != "window"})
                if "window" in kw:
                    cfg.window = kw["window"]
                with self.assertRaises(A.EtchError) as e:
                    A.compute_features(np.zeros(16000, np.float32), cfg)
                self.assertIn("features:", e.exception.message)


def wav_bytes(fmt_tag, channels, rate, bits, payload, extensible=False, extra_chunks=(),
              riff_size=None, data_size=None, block_align=None, fmt_first=True):
    ba = block_align if block_align is not None else channels * bits // 8
    if extensible:
        sub = struct.pack("<H", fmt_tag) + bytes([0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00,
                                                  0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71])
        fmt = struct.pack("<HHIIHHHHI", 0xFFFE, channels, rate, rate * ba, ba, bits, 22, bits,
                          0) + sub
    else:
        fmt = struct.pack("<HHIIHH", fmt_tag, channels, rate, rate * ba, ba, bits)
    chunks = []
    for cid, body in extra_chunks:
        chunks.append(cid + struct.pack("<I", len(body)) + body + (b"\0" if len(body) % 2 else b""))
    fmt_chunk = b"fmt " + struct.pack("<I", len(fmt)) + fmt
    data_chunk = b"data" + struct.pack("<I", len(payload) if data_size is None else data_size) + payload
    body = b"WAVE" + (fmt_chunk + b"".join(chunks) + data_chunk if fmt_first
                      else data_chunk + fmt_chunk)
    return b"RIFF" + struct.pack("<I", len(body) if riff_size is None else riff_size) + body


class Wav(unittest.TestCase):
    def test_every_encoding(self):
        rng = np.random.default_rng(1)
        frames = 257
        for channels in (1, 2, 5):
            x = rng.uniform(-1, 1, (frames, channels))
            cases = {
                "u8": (1, 8, np.clip(np.round(x * 128 + 128), 0, 255).astype(np.uint8),
                       lambda q: (q.astype(np.float64) - 128) / 128),
                "s16": (1, 16, np.clip(np.round(x * 32768), -32768, 32767).astype("<i2"),
                        lambda q: q / 32768.0),
                "s32": (1, 32, np.clip(np.round(x * 2 ** 31), -2 ** 31, 2 ** 31 - 1).astype("<i4"),
                        lambda q: q / 2.0 ** 31),
                "f32": (3, 32, x.astype("<f4"), lambda q: q.astype(np.float64)),
                "f64": (3, 64, x.astype("<f8"), lambda q: q),
            }
            for name, (tag, bits, q, deq) in cases.items():
                for ext in (False, True):
                    with self.subTest(channels=channels, encoding=name, extensible=ext):
                        data = wav_bytes(tag, channels, 22050, bits, q.tobytes(), extensible=ext,
                                         extra_chunks=[(b"LIST", b"INFOabc")])
                        info, got = A.wav_decode(data)
                        self.assertEqual((info.sample_rate, info.channels, info.frames),
                                         (22050, channels, frames))
                        want = deq(q).mean(axis=1)
                        np.testing.assert_allclose(got, want, rtol=0, atol=1e-6)
            # 24-bit: three little-endian bytes per sample
            q = np.clip(np.round(x * 2 ** 23), -2 ** 23, 2 ** 23 - 1).astype(np.int64)
            raw = b"".join(int(v & 0xFFFFFF).to_bytes(3, "little") for v in q.ravel())
            info, got = A.wav_decode(wav_bytes(1, channels, 48000, 24, raw))
            np.testing.assert_allclose(got, (q / 2.0 ** 23).mean(axis=1), rtol=0, atol=1e-6)

    def test_real_file_and_writer(self):
        with open(SPEECH16[0], "rb") as f:
            data = f.read()
        info, got = A.wav_decode(data)
        want, fs = read_wav(SPEECH16[0])
        self.assertEqual(info.sample_rate, fs)
        np.testing.assert_array_equal(got, want.astype(np.float32))
        # write it back: the same 16-bit samples
        cap = 44 + 2 * len(got)
        out = (A.C.c_char * cap)()
        n = A.C.c_size_t()
        A.check(A.LIB.etch_wav_write_s16(A.fptr(got), A.C.c_size_t(len(got)), A.C.c_uint32(fs),
                                         out, A.C.c_size_t(cap), A.C.byref(n)))
        info2, back = A.wav_decode(bytes(out)[:n.value])
        np.testing.assert_array_equal(back, got)

    def test_zero_frames(self):
        info, got = A.wav_decode(wav_bytes(1, 1, 16000, 16, b""))
        self.assertEqual(info.frames, 0)

    def test_malformed(self):
        pcm = np.zeros(100, "<i2").tobytes()
        good = wav_bytes(1, 1, 16000, 16, pcm)
        cases = {
            "not a RIFF/WAVE": b"RIFX" + good[4:],
            "RF64": b"RF64" + good[4:],
            "too short": good[:10],
            "data chunk says": wav_bytes(1, 1, 16000, 16, pcm, data_size=100000),
            "no data chunk": good[:36],
            "no fmt chunk": b"RIFF" + struct.pack("<I", 4 + 8 + 6) + b"WAVE" + b"LIST" +
                            struct.pack("<I", 6) + b"INFOab",
            "data chunk before the fmt": wav_bytes(1, 1, 16000, 16, pcm, fmt_first=False),
            "block alignment": wav_bytes(1, 1, 16000, 16, pcm, block_align=3),
            "A-law": wav_bytes(6, 1, 8000, 8, pcm),
            "mu-law": wav_bytes(7, 1, 8000, 8, pcm),
            "format tag 0x0002": wav_bytes(2, 1, 8000, 4, pcm, block_align=256),
            "sample rate 0": wav_bytes(1, 1, 0, 16, pcm),
            "0 channels": wav_bytes(1, 0, 16000, 16, pcm, block_align=0),
            "12-bit PCM": wav_bytes(1, 1, 16000, 12, pcm, block_align=2),
            "whole number": wav_bytes(1, 2, 16000, 16, pcm[:-2]),
            "a second data chunk": good[:4] + struct.pack("<I", len(good) - 8 + 10) + good[8:] +
                                   b"data" + struct.pack("<I", 2) + b"\0\0",
            "RIFF size": good[:4] + struct.pack("<I", 2) + good[8:],
            "sub-format GUID": wav_bytes(1, 1, 16000, 16, pcm, extensible=True)
                               .replace(bytes([0x38, 0x9B, 0x71]), bytes([0x38, 0x9B, 0x72])),
            "not a finite number": wav_bytes(3, 1, 16000, 32, np.array([0.0, np.nan], "<f4").tobytes()),
        }
        for why, data in cases.items():
            with self.subTest(why=why):
                with self.assertRaises(A.EtchError) as e:
                    A.wav_decode(data)
                self.assertIn(why, e.exception.message)

    def test_cut_file_is_read_as_far_as_it_goes(self):
        # a RIFF size past the end (a cut recording) with a data chunk that fits: accepted
        pcm = np.arange(50, dtype="<i2").tobytes()
        data = wav_bytes(1, 1, 16000, 16, pcm, riff_size=1 << 20)
        info, got = A.wav_decode(data)
        self.assertEqual(info.frames, 50)


class Resample(unittest.TestCase):
    def test_against_sox_on_real_speech(self):
        # (file, out rate, full-band SNR floor, SNR floor below 80% of the lower Nyquist)
        cases = [(SPEECH8[0], 16000, 35, 70), (SPEECH8[1], 16000, 35, 70),
                 (SPEECH16[0], 8000, 25, 60), (SPEECH16[0], 44100, 40, 70),
                 (SPEECH16[1], 22050, 40, 70), (SPEECH16[1], 11025, 25, 60)]
        for path, fo, full_floor, band_floor in cases:
            x, fi = read_wav(path)
            with self.subTest(file=os.path.basename(path), rates=(fi, fo)):
                got = A.resample(x, fi, fo).astype(np.float64)
                self.assertEqual(len(got), -(-len(x) * fo // fi))
                ref = sox_rate(x, fi, fo)
                n = min(len(got), len(ref))
                full = snr_db(got[:n], ref[:n])
                edge = 0.8 * min(fi, fo) / 2
                band = snr_db(lowpass(got[:n], fo, edge), lowpass(ref[:n], fo, edge))
                self.assertGreater(full, full_floor)
                self.assertGreater(band, band_floor)

    def test_sine_is_exact(self):
        for fi, fo, f in [(44100, 16000, 1000.0), (8000, 16000, 3000.0), (48000, 16000, 5000.0),
                          (16000, 16001, 2000.0)]:
            with self.subTest(rates=(fi, fo)):
                t = np.arange(fi) / fi
                got = A.resample(np.sin(2 * np.pi * f * t), fi, fo).astype(np.float64)
                ref = np.sin(2 * np.pi * f * np.arange(len(got)) / fo)
                mid = slice(len(got) // 10, len(got) - len(got) // 10)
                err = 20 * np.log10(np.abs(got[mid] - ref[mid]).max())
                self.assertLess(err, -80.0)

    def test_chunking_does_not_matter(self):
        x, fi = read_wav(SPEECH8[0])
        for fo in (16000, 44100, 7999):
            whole = A.resample(x, fi, fo)
            for chunk in (1, 7, 160, 5000):
                with self.subTest(out_rate=fo, chunk=chunk):
                    np.testing.assert_array_equal(A.resample(x, fi, fo, chunk=chunk), whole)

    def test_bad_use(self):
        for kw in [dict(in_rate=0), dict(out_rate=2000000), dict(zero_crossings=2),
                   dict(cutoff=0.2), dict(kaiser_beta=-1.0), dict(max_phases=4)]:
            with self.subTest(config=kw):
                ir, orr = kw.pop("in_rate", 16000), kw.pop("out_rate", 8000)
                with self.assertRaises(A.EtchError) as e:
                    A.Resampler(ir, orr, **kw)
                self.assertIn("resampler:", e.exception.message)
        with self.assertRaises(A.EtchError) as e:
            A.Resampler(1000000, 1)
        self.assertIn("taps", e.exception.message)
        # an output buffer too small: refused, nothing consumed, the next call works
        r = A.Resampler(8000, 16000)
        x = np.ones(1000, np.float32)
        out = np.zeros(10, np.float32)
        n = A.C.c_size_t()
        st = A.LIB.etch_resampler_process(r.r, A.fptr(x), A.C.c_size_t(1000), A.fptr(out),
                                          A.C.c_size_t(10), A.C.byref(n))
        self.assertNotEqual(st, 0)
        whole = np.concatenate([r.process(x), r.flush()])
        np.testing.assert_array_equal(whole, A.resample(x, 8000, 16000))
        # processing after a flush is an error until reset
        with self.assertRaises(A.EtchError):
            r.process(x)


@unittest.skipUnless(os.environ.get("ETCH_CLI"), "ETCH_CLI names the etch binary")
class Cli(unittest.TestCase):
    """etch features: the same numbers as the library, as .npy, and its bad input."""

    def run_cli(self, *args, stdin=None):
        return subprocess.run([os.environ["ETCH_CLI"], "features"] + list(args), input=stdin,
                              capture_output=True)

    def test_npy_matches_reference(self):
        d = tempfile.mkdtemp()
        try:
            out = os.path.join(d, "mfcc.npy")
            r = self.run_cli(SPEECH16[0], "--frames", "49", "--shape", "1,1,49,10", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            got = np.load(out)
            self.assertEqual((got.dtype, got.shape), (np.float32, (1, 1, 49, 10)))
            x, _ = read_wav(SPEECH16[0])
            ref = R.features(x[:640 + 48 * 320].astype(np.float32).astype(np.float64))
            self.assertLess(np.abs(got[0, 0] - ref).max(), 1e-3 + 2e-5 * np.abs(ref).max())
            # 8 kHz input: resampled to 16 kHz first, the library's way
            r = self.run_cli(SPEECH8[0], "--mfcc", "0", "--log", "ln", "-o", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            x8, fs = read_wav(SPEECH8[0])
            x16 = A.resample(x8, fs, 16000)
            want = A.compute_features(x16, A.features_config(n_mfcc=0, log="ln"))
            np.testing.assert_array_equal(np.load(out), want)
            # short audio padded with silence to --frames; raw PCM from standard input
            raw = (np.clip(x[:4000], -1, 1) * 32767).astype("<i2").tobytes()
            r = self.run_cli("-", "--raw-rate", "16000", "--frames", "49", "-o", out, stdin=raw)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(np.load(out).shape, (49, 10))
        finally:
            shutil.rmtree(d)

    def test_bad_input(self):
        d = tempfile.mkdtemp()
        try:
            bad = os.path.join(d, "bad.wav")
            with open(bad, "wb") as f:
                f.write(wav_bytes(1, 1, 16000, 16, b"\0" * 100, data_size=5000))
            cases = [
                ((os.path.join(d, "missing.wav"),), 1, "missing.wav"),
                ((bad,), 1, "data chunk says"),
                ((SPEECH16[0], "--shape", "2,5"), 1, "--shape [2, 5] holds 10 values"),
                ((SPEECH16[0], "--shape", "1,,2"), 2, "--shape"),
                ((SPEECH16[0], "--window", "kaiser"), 2, "--window"),
                ((SPEECH16[0], "--mels", "0"), 2, "--mels"),
                ((SPEECH16[0], "--fmax", "9000"), 1, "mel range"),
                ((SPEECH16[0], "--raw-rate", "8000"), 2, "standard input"),
                ((), 2, "missing FILE"),
            ]
            for args, code, why in cases:
                with self.subTest(args=args):
                    r = self.run_cli(*args)
                    self.assertEqual(r.returncode, code, r.stderr)
                    self.assertIn(why, r.stderr.decode())
            r = self.run_cli("-", "--raw-rate", "16000", stdin=b"\0\0\0")
            self.assertEqual(r.returncode, 1)
            self.assertIn("whole 16-bit samples", r.stderr.decode())
        finally:
            shutil.rmtree(d)


class Stream(unittest.TestCase):
    def test_windows_equal_slices(self):
        rng = np.random.default_rng(3)
        x = rng.standard_normal(20000).astype(np.float32)
        for window, hop, capacity in [(640, 320, 640), (512, 160, 4096), (400, 400, 1000),
                                      (1, 1, 1)]:
            with self.subTest(window=window, hop=hop, capacity=capacity):
                size = A.C.c_size_t()
                A.check(A.LIB.etch_audio_stream_mem_size(A.C.c_size_t(window), A.C.c_size_t(hop),
                                                         A.C.c_size_t(capacity), A.C.byref(size)))
                keep, mem = A.aligned(size.value)
                s = A.C.c_void_p()
                A.check(A.LIB.etch_audio_stream_init(A.C.c_size_t(window), A.C.c_size_t(hop),
                                                     A.C.c_size_t(capacity),
                                                     mem.ctypes.data_as(A.C.c_void_p), size,
                                                     A.C.byref(s)))
                out = np.zeros(window, np.float32)
                got, pos = [], 0
                taken = A.C.c_size_t()
                while pos < len(x):
                    n = int(rng.integers(1, 1500))
                    chunk = np.ascontiguousarray(x[pos:pos + n])
                    A.LIB.etch_audio_stream_push(s, A.fptr(chunk), A.C.c_size_t(len(chunk)),
                                                 A.C.byref(taken))
                    pos += taken.value
                    while A.LIB.etch_audio_stream_pull(s, A.fptr(out)):
                        got.append(out.copy())
                want = [x[i:i + window] for i in range(0, len(x) - window + 1, hop)]
                self.assertEqual(len(got), len(want))
                for g, w in zip(got, want):
                    np.testing.assert_array_equal(g, w)

    def test_bad_shapes(self):
        size = A.C.c_size_t()
        for w, h, c in [(0, 1, 10), (10, 0, 10), (10, 11, 20), (10, 5, 9)]:
            with self.subTest(window=w, hop=h, capacity=c):
                self.assertNotEqual(A.LIB.etch_audio_stream_mem_size(
                    A.C.c_size_t(w), A.C.c_size_t(h), A.C.c_size_t(c), A.C.byref(size)), 0)


if __name__ == "__main__":
    unittest.main()
