"""A small model zoo used by the tests, the memory report and the README: each entry builds a
model (random initialisation, seeded) and example inputs.

    model, inputs = etch.zoo.build("lenet")
    program = etch.export(model, inputs)

From the command line: ``python3 -m etch export etch.zoo:lenet --input 1x1x28x28:float32 ...``
(every factory here can be called without arguments).
"""

from __future__ import annotations

import math
from typing import Callable, Dict, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F

__all__ = ["MODELS", "build", "names"]


def _seeded(fn):
    def wrapped(*a, **k):
        torch.manual_seed(0)
        return fn(*a, **k)
    wrapped.__name__ = fn.__name__
    wrapped.__doc__ = fn.__doc__
    return wrapped


class MLP(nn.Module):
    def __init__(self, d_in=32, hidden=64, d_out=10):
        super().__init__()
        self.fc1 = nn.Linear(d_in, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, d_out)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class LeNet(nn.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.bn1 = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.bn2 = nn.BatchNorm2d(16)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.max_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = F.relu(self.fc2(x))
        return self.fc3(x)


def _randomize_bn(model: nn.Module) -> nn.Module:
    """Give batch norms non-trivial statistics (fresh ones are the identity)."""
    g = torch.Generator().manual_seed(1)
    for m in model.modules():
        if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.track_running_stats:
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) * 0.5 + 0.75)
            if m.affine:
                m.weight.data.copy_(torch.rand(m.weight.shape, generator=g) * 0.5 + 0.75)
                m.bias.data.copy_(torch.randn(m.bias.shape, generator=g) * 0.1)
    return model


class SequenceModel(nn.Module):
    """A recurrent classifier: LSTM or GRU over the sequence, linear head on the last step."""

    def __init__(self, kind="lstm", d_in=16, hidden=32, layers=2, d_out=8):
        super().__init__()
        rnn = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = rnn(d_in, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.head(y[:, -1])


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class LlamaBlock(nn.Module):
    """One llama-style decoder block: RMSNorm, rotary embeddings, grouped-query causal
    attention, SwiGLU feed-forward, residuals."""

    def __init__(self, dim=64, n_heads=8, n_kv_heads=4, hidden=172, max_seq=32):
        super().__init__()
        self.n_heads, self.n_kv = n_heads, n_kv_heads
        self.hd = dim // n_heads
        self.attn_norm = RMSNorm(dim)
        self.ffn_norm = RMSNorm(dim)
        self.wq = nn.Linear(dim, n_heads * self.hd, bias=False)
        self.wk = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wv = nn.Linear(dim, n_kv_heads * self.hd, bias=False)
        self.wo = nn.Linear(n_heads * self.hd, dim, bias=False)
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)
        freqs = 1.0 / (10000 ** (torch.arange(0, self.hd, 2).float() / self.hd))
        ang = torch.outer(torch.arange(max_seq).float(), freqs)
        self.register_buffer("cos", torch.cat([ang.cos(), ang.cos()], -1), persistent=False)
        self.register_buffer("sin", torch.cat([ang.sin(), ang.sin()], -1), persistent=False)
        mask = torch.full((max_seq, max_seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask, persistent=False)

    @staticmethod
    def _rotate_half(x):
        h = x.shape[-1] // 2
        return torch.cat([-x[..., h:], x[..., :h]], -1)

    def _rope(self, x, T):
        cos, sin = self.cos[:T], self.sin[:T]
        return x * cos + self._rotate_half(x) * sin

    def forward(self, x):
        B, T, D = x.shape
        h = self.attn_norm(x)
        q = self.wq(h).view(B, T, self.n_heads, self.hd).transpose(1, 2)
        k = self.wk(h).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        v = self.wv(h).view(B, T, self.n_kv, self.hd).transpose(1, 2)
        q, k = self._rope(q, T), self._rope(k, T)
        rep = self.n_heads // self.n_kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.hd) + self.mask[:T, :T]
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(1, 2).reshape(B, T, D)
        x = x + self.wo(o)
        h = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(h)) * self.w3(h))


class AudioConv1d(nn.Module):
    """Keyword-spotting style 1-D convolution stack over a waveform."""

    def __init__(self, n_classes=12):
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv1d(1, 16, 80, stride=16), nn.BatchNorm1d(16), nn.ReLU(),
            nn.MaxPool1d(4),
            nn.Conv1d(16, 32, 3, padding=1), nn.BatchNorm1d(32), nn.ReLU(),
            nn.MaxPool1d(4),
            nn.Conv1d(32, 32, 3, padding=1, groups=2), nn.BatchNorm1d(32), nn.ReLU(),
        )
        self.fc = nn.Linear(32, n_classes)

    def forward(self, x):
        x = self.net(x)
        return self.fc(x.mean(-1))


@_seeded
def mlp():
    return MLP()


@_seeded
def lenet():
    return _randomize_bn(LeNet())


@_seeded
def mobilenet_v2():
    import torchvision
    return _randomize_bn(torchvision.models.mobilenet_v2())


@_seeded
def resnet18():
    import torchvision
    return _randomize_bn(torchvision.models.resnet18())


@_seeded
def lstm():
    return SequenceModel("lstm")


@_seeded
def gru():
    return SequenceModel("gru")


@_seeded
def transformer_encoder():
    return nn.TransformerEncoderLayer(64, 4, 128, dropout=0.1, batch_first=True)


@_seeded
def llama_block():
    return LlamaBlock()


@_seeded
def audio_conv1d():
    return _randomize_bn(AudioConv1d())


def _inputs(*shapes, dtype=torch.float32):
    g = torch.Generator().manual_seed(123)
    return tuple(torch.randn(s, generator=g).to(dtype) for s in shapes)


# name -> (factory, example input shapes)
MODELS: Dict[str, Tuple[Callable[[], nn.Module], Tuple]] = {
    "mlp": (mlp, ((4, 32),)),
    "lenet": (lenet, ((1, 1, 28, 28),)),
    "mobilenet_v2": (mobilenet_v2, ((1, 3, 224, 224),)),
    "resnet18": (resnet18, ((1, 3, 224, 224),)),
    "lstm": (lstm, ((2, 12, 16),)),
    "gru": (gru, ((2, 12, 16),)),
    "transformer_encoder": (transformer_encoder, ((2, 16, 64),)),
    "llama_block": (llama_block, ((1, 16, 64),)),
    "audio_conv1d": (audio_conv1d, ((1, 1, 16000),)),
}


def names():
    return list(MODELS)


def build(name: str):
    """(model in eval mode, example inputs)."""
    factory, shapes = MODELS[name]
    return factory().eval(), _inputs(*shapes)
