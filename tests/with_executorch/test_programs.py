"""The programs of et_programs.py follow ``model.to(device)``: every table reaches the inputs' device.

benchmarks/executorch_cuda.py exports each program on the GPU after ``model.cuda()``; a table kept as a
plain attribute (not a buffer) stays on the CPU, and the export fails with a device mismatch. The "meta"
device shows the same on the CPU: a model whose tensors all follow it runs on meta inputs. No ExecuTorch
needed.
"""

import et_programs
import pytest
import torch


@pytest.mark.parametrize("name", list(et_programs.PROGRAMS))
def test_every_table_follows_the_model_to_another_device(name):
    case = et_programs.PROGRAMS[name]
    model, args, _, _ = case.build(torch.float32)
    model = model.to("meta")
    outputs = model(*(a.to("meta") for a in args))
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    assert outputs and all(out.device.type == "meta" for out in outputs)
