"""Generators (and reasons for none) of the rules added for issue 27's last gaps: the anchors' nn and random ops
and the OpInfo walk's linear algebra, for op_gen.GENERATORS (op_gen imports this module at its end)."""

from __future__ import annotations

import torch

from op_gen import NOT_GENERATED

aten = torch.ops.aten

NOT_GENERATED.update({
    aten.convolution.default: "eager has no complex kernel for aten.convolution (F.conv* reach it only through a "
                              "composite of real convolutions): test_nn.py compares it with F.conv*",
    aten.avg_pool2d.default: "eager has no complex average pooling: test_nn.py compares it with the pool of each part",
    aten.avg_pool3d.default: "eager has no complex average pooling: test_nn.py compares it with the pool of each part",
    aten.randn.default: "random values: test_random.py compares statistics",
    aten.randn_like.default: "random values: test_random.py compares statistics",
    aten.allclose.default: "export refuses it on complex values (a Python bool): test_scalar_results.py",
    aten._local_scalar_dense.default: "export refuses a complex item: test_scalar_results.py",
})
