"""Models for the tracer's tests; each factory returns (model, inputs[, loss])."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class _Block(nn.Module):
    """CIFAR ResNet basic block; the shortcut of a downsampling block is option A (He et al.
    2016): stride-2 subsampling and zero channels padded, no parameters."""

    def __init__(self, inputs: int, planes: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, planes, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(planes)
        self.conv2 = nn.Conv2d(planes, planes, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(planes)
        self.pad = planes // 4 if stride != 1 or inputs != planes else 0

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x
        if self.pad:
            shortcut = F.pad(x[:, :, ::2, ::2], (0, 0, 0, 0, self.pad, self.pad))
        return F.relu(out + shortcut)


class CifarResNet(nn.Module):
    """ResNet-(6n+2) for CIFAR: 16, 32, 64 channels, n blocks each, global pooling, linear."""

    def __init__(self, n: int = 5, classes: int = 10):
        super().__init__()
        self.conv = nn.Conv2d(3, 16, 3, 1, 1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        blocks, inputs = [], 16
        for planes, stride in ((16, 1), (32, 2), (64, 2)):
            for i in range(n):
                blocks.append(_Block(inputs, planes, stride if i == 0 else 1))
                inputs = planes
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        out = self.blocks(F.relu(self.bn(self.conv(x))))
        out = F.avg_pool2d(out, out.shape[3])
        return self.fc(out.view(out.size(0), -1))


def resnet32():
    """The published resnet32 trace's shapes: batch 56 of 224x224 RGB images, 10 classes."""
    model = CifarResNet(n=5)
    images = torch.randn(56, 3, 224, 224)
    labels = torch.randint(0, 10, (56,))
    return model, images, lambda out: F.cross_entropy(out, labels)


class _Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = nn.Linear(48, 96), nn.Linear(96, 96), nn.Linear(96, 10)

    def forward(self, x):
        h = torch.tanh(self.a(x.flatten(1)))
        h = F.gelu(self.b(h)) + h  # a residual: h is used twice
        return self.c(h.t().contiguous().t())  # views, and a copy of a transposed view


def mlp():
    """Operators that allocate only their outputs (no workspaces), no in-place writes."""
    labels = torch.randint(0, 10, (16,))
    return _Mlp(), torch.randn(16, 3, 4, 4), lambda out: F.cross_entropy(out, labels)


class _Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.qkv, self.out = nn.Linear(32, 96), nn.Linear(32, 32)

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)  # three views of one output
        weights = torch.softmax(q @ k.transpose(-2, -1) / 32**0.5, dim=-1)
        return self.out((weights @ v).reshape(-1, 32))


def attention():
    """Self-attention: views (chunk, transpose, reshape) feeding matmuls; no in-place writes."""
    return _Attention(), torch.randn(4, 10, 32)


def broken():
    """A factory whose step fails: inputs of the wrong width."""
    return nn.Linear(4, 2), torch.randn(3, 5)
