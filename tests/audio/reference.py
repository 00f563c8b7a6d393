"""Reference features for the audio tests: torch.stft for the spectrogram, then torchaudio's
MelSpectrogram / AmplitudeToDB / MFCC formulas (torchaudio is not packaged for Debian 12, so
they are written out here from its documented definitions) in float64."""
import numpy as np
import torch


def hz_to_mel(f, scale):
    f = np.asarray(f, dtype=np.float64)
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(f >= min_log_hz, min_log_mel + np.log(np.maximum(f, 1e-30) / min_log_hz) / logstep,
                    f / f_sp)


def mel_to_hz(m, scale):
    m = np.asarray(m, dtype=np.float64)
    if scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    f_sp, min_log_hz = 200.0 / 3, 1000.0
    min_log_mel, logstep = min_log_hz / f_sp, np.log(6.4) / 27.0
    return np.where(m >= min_log_mel, min_log_hz * np.exp(logstep * (m - min_log_mel)), f_sp * m)


def mel_fbanks(n_freqs, f_min, f_max, n_mels, sample_rate, norm, scale):
    """torchaudio.functional.melscale_fbanks: [n_freqs, n_mels]."""
    all_freqs = np.linspace(0, sample_rate // 2, n_freqs)
    m_pts = np.linspace(hz_to_mel(f_min, scale), hz_to_mel(f_max, scale), n_mels + 2)
    f_pts = mel_to_hz(m_pts, scale)
    f_diff = f_pts[1:] - f_pts[:-1]
    slopes = f_pts[None, :] - all_freqs[:, None]
    down = -slopes[:, :-2] / f_diff[:-1]
    up = slopes[:, 2:] / f_diff[1:]
    fb = np.maximum(0.0, np.minimum(down, up))
    if norm == "slaney":
        fb *= 2.0 / (f_pts[2:n_mels + 2] - f_pts[:n_mels])
    return fb


def create_dct(n_mfcc, n_mels, ortho):
    """torchaudio.functional.create_dct: [n_mels, n_mfcc]."""
    n = np.arange(n_mels, dtype=np.float64)
    k = np.arange(n_mfcc, dtype=np.float64)[:, None]
    dct = np.cos(np.pi / n_mels * (n + 0.5) * k)
    if ortho:
        dct[0] *= 1.0 / np.sqrt(2.0)
        dct *= np.sqrt(2.0 / n_mels)
    else:
        dct *= 2.0
    return dct.T


def window(kind, n, periodic):
    if kind == "hann":
        return torch.hann_window(n, periodic=periodic, dtype=torch.float64)
    if kind == "hamming":
        return torch.hamming_window(n, periodic=periodic, dtype=torch.float64)
    return torch.ones(n, dtype=torch.float64)


def features(x, sample_rate=16000, n_fft=640, win_length=640, hop_length=320, window_kind="hann",
             window_periodic=True, center=False, preemphasis=0.0, power=2.0, n_mels=40,
             f_min=20.0, f_max=4000.0, mel_scale="htk", mel_norm_slaney=False, log="db",
             log_offset=1e-6, amin=1e-10, top_db=80.0, n_mfcc=10, dct_ortho=True):
    """[frames, n_mfcc or n_mels] in float64."""
    x = np.asarray(x, dtype=np.float64)
    if preemphasis:
        x = np.concatenate([x[:1], x[1:] - preemphasis * x[:-1]])
    xt = torch.tensor(x)
    if center:
        pad = n_fft // 2
        xt = torch.nn.functional.pad(xt[None, None], (pad, pad), mode="reflect")[0, 0]
    spec = torch.stft(xt, n_fft, hop_length, win_length, window(window_kind, win_length, window_periodic),
                      center=False, return_complex=True).abs().numpy() ** power  # [bins, frames]
    fb = mel_fbanks(n_fft // 2 + 1, f_min, f_max, n_mels, sample_rate,
                    "slaney" if mel_norm_slaney else None, mel_scale)
    mel = spec.T @ fb  # [frames, n_mels]
    if log == "ln":
        mel = np.log(mel + log_offset)
    elif log == "db":
        mel = 10.0 * np.log10(np.maximum(mel, amin))
        if top_db > 0:
            mel = np.maximum(mel, mel.max() - top_db)
    if n_mfcc:
        return mel @ create_dct(n_mfcc, n_mels, dct_ortho)
    return mel
