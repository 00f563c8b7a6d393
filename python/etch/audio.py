"""etch.audio: the C audio front end (include/etch/audio.h) from Python, through libetch.so.

    import etch.audio as ea
    x, rate = ea.read_wav("yes.wav")                 # mono float32 in [-1, 1)
    x = ea.resample(x, rate, 16000)                  # polyphase windowed-sinc
    mfcc = ea.features(x)                            # [frames, 10]: the keyword spotters' MFCC
    logmel = ea.features(x, n_mfcc=0, log="ln", center=True, n_fft=400, hop_length=160,
                         n_mels=80, f_min=0.0, f_max=8000.0)

The numbers are the C library's own (training on them gives a model the C front end feeds
exactly). ``features(**config)`` takes the fields of ``etch_features_config`` by name, with
``window`` ("hann", "hamming", "rect"), ``mel_scale`` ("htk", "slaney") and ``log`` ("none",
"ln", "db") as strings. Errors raise :class:`EtchError` with the library's message.
"""
import ctypes as C

import numpy as np

from etch import _lib

LIB = _lib.load()
LIB.etch_last_error.restype = C.c_char_p


class FeaturesConfig(C.Structure):
    _fields_ = [("sample_rate", C.c_uint32), ("n_fft", C.c_uint32), ("win_length", C.c_uint32),
                ("hop_length", C.c_uint32), ("window", C.c_int), ("window_periodic", C.c_bool),
                ("center", C.c_bool), ("preemphasis", C.c_float), ("power", C.c_float),
                ("n_mels", C.c_uint32), ("f_min", C.c_float), ("f_max", C.c_float),
                ("mel_scale", C.c_int), ("mel_norm_slaney", C.c_bool), ("log", C.c_int),
                ("log_offset", C.c_float), ("amin", C.c_float), ("top_db", C.c_float),
                ("n_mfcc", C.c_uint32), ("dct_ortho", C.c_bool)]


class ResamplerConfig(C.Structure):
    _fields_ = [("in_rate", C.c_uint32), ("out_rate", C.c_uint32),
                ("zero_crossings", C.c_uint32), ("cutoff", C.c_float),
                ("kaiser_beta", C.c_float), ("max_phases", C.c_uint32)]


class WavInfo(C.Structure):
    _fields_ = [("sample_rate", C.c_uint32), ("channels", C.c_uint32),
                ("bits_per_sample", C.c_uint32), ("encoding", C.c_int), ("frames", C.c_uint64),
                ("data_offset", C.c_size_t), ("data_size", C.c_size_t)]


LIB.etch_features_default_config.restype = FeaturesConfig
LIB.etch_resampler_default_config.restype = ResamplerConfig
LIB.etch_resampler_default_config.argtypes = [C.c_uint32, C.c_uint32]
LIB.etch_resampler_max_output.restype = C.c_size_t
LIB.etch_resampler_max_output.argtypes = [C.c_void_p, C.c_size_t]
LIB.etch_features_num_frames.restype = C.c_size_t
LIB.etch_features_num_frames.argtypes = [C.c_void_p, C.c_size_t]
LIB.etch_features_dim.restype = C.c_uint32
LIB.etch_features_dim.argtypes = [C.c_void_p]

WINDOW = {"hann": 0, "hamming": 1, "rect": 2}
MEL = {"htk": 0, "slaney": 1}
LOG = {"none": 0, "ln": 1, "db": 2}


class EtchError(Exception):
    def __init__(self, status, message):
        super().__init__("status 0x%x: %s" % (status, message))
        self.status = status
        self.message = message


def check(status):
    if status:
        raise EtchError(status, LIB.etch_last_error().decode())


def fptr(a):
    return a.ctypes.data_as(C.POINTER(C.c_float))


def aligned(nbytes):
    raw = np.zeros(nbytes + 16, dtype=np.uint8)
    off = (-raw.ctypes.data) % 16
    return raw, raw[off:off + nbytes]


def features_config(**kw):
    cfg = LIB.etch_features_default_config()
    for k, v in kw.items():
        if k == "window":
            v = WINDOW[v]
        elif k == "mel_scale":
            v = MEL[v]
        elif k == "log":
            v = LOG[v]
        setattr(cfg, k, v)
    return cfg


def compute_features(samples, cfg, max_frames=None):
    """Features of `samples` under a FeaturesConfig (features() builds one)."""
    x = np.ascontiguousarray(samples, dtype=np.float32)
    size = C.c_size_t()
    check(LIB.etch_features_mem_size(C.byref(cfg), C.byref(size)))
    keep, mem = aligned(size.value)
    f = C.c_void_p()
    check(LIB.etch_features_init(C.byref(cfg), mem.ctypes.data_as(C.c_void_p), size, C.byref(f)))
    n = LIB.etch_features_num_frames(f, len(x))
    dim = LIB.etch_features_dim(f)
    if max_frames is None:
        max_frames = n
    out = np.zeros((max(max_frames, 1), dim), dtype=np.float32)
    frames = C.c_size_t()
    check(LIB.etch_features_compute(f, fptr(x), C.c_size_t(len(x)), fptr(out),
                                    C.c_size_t(max_frames), C.byref(frames)))
    del keep
    return out[:frames.value]


class Resampler:
    def __init__(self, in_rate, out_rate, **kw):
        self.cfg = LIB.etch_resampler_default_config(in_rate, out_rate)
        for k, v in kw.items():
            setattr(self.cfg, k, v)
        size = C.c_size_t()
        check(LIB.etch_resampler_mem_size(C.byref(self.cfg), C.byref(size)))
        self._keep, mem = aligned(size.value)
        self.r = C.c_void_p()
        check(LIB.etch_resampler_init(C.byref(self.cfg), mem.ctypes.data_as(C.c_void_p), size,
                                      C.byref(self.r)))

    def process(self, x):
        x = np.ascontiguousarray(x, dtype=np.float32)
        cap = LIB.etch_resampler_max_output(self.r, len(x))
        out = np.zeros(max(cap, 1), dtype=np.float32)
        n = C.c_size_t()
        check(LIB.etch_resampler_process(self.r, fptr(x), C.c_size_t(len(x)), fptr(out),
                                         C.c_size_t(cap), C.byref(n)))
        return out[:n.value]

    def flush(self, cap=1 << 20):
        out = np.zeros(cap, dtype=np.float32)
        n = C.c_size_t()
        check(LIB.etch_resampler_flush(self.r, fptr(out), C.c_size_t(cap), C.byref(n)))
        return out[:n.value]


def resample(x, in_rate, out_rate, chunk=None, **kw):
    r = Resampler(in_rate, out_rate, **kw)
    if chunk is None:
        parts = [r.process(x)]
    else:
        parts = [r.process(x[i:i + chunk]) for i in range(0, len(x), chunk)]
    parts.append(r.flush())
    return np.concatenate(parts)


def wav_parse(data):
    buf = C.create_string_buffer(bytes(data), len(data))
    info = WavInfo()
    check(LIB.etch_wav_parse(buf, C.c_size_t(len(data)), C.byref(info)))
    return info


def wav_decode(data):
    buf = C.create_string_buffer(bytes(data), len(data))
    info = WavInfo()
    check(LIB.etch_wav_parse(buf, C.c_size_t(len(data)), C.byref(info)))
    out = np.zeros(max(info.frames, 1), dtype=np.float32)
    check(LIB.etch_wav_decode_mono(buf, C.c_size_t(len(data)), C.byref(info), C.c_uint64(0),
                                   C.c_uint64(info.frames), fptr(out)))
    return info, out[:info.frames]


def features(samples, max_frames=None, **config):
    """[frames, n_mfcc or n_mels] float32 of mono `samples` (etch_features_compute)."""
    return compute_features(samples, features_config(**config), max_frames)


def read_wav(path):
    """(mono float32 samples, sample rate) of a WAV file (etch_wav_parse + decode_mono)."""
    with open(path, "rb") as f:
        data = f.read()
    info, x = wav_decode(data)
    return x, info.sample_rate
