"""How Inductor compiles each way of writing a complex product on interleaved pairs (CUDA only).

    python3 benchmarks/scripts/pair_product_formulations.py

Llama-style q/k RoPE (B=4, S=4096, H=32, D=128, bf16 in and out, float32 math), each formulation under
torch.compile with default options and with coordinate_descent_tuning, against a device copy of the
same bytes. The results and what they decided are in benchmarks/NOTES.md.
"""
import os
import sys
import time

import torch
import triton.testing

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from rope_modules import rotary_angles
torch.manual_seed(0)
B,S,H,D = 4,4096,32,128
q = torch.randn(B,S,H,D, device="cuda", dtype=torch.bfloat16)
k = torch.randn_like(q)
ang = rotary_angles(D, S).cuda()
c, s = ang.cos(), ang.sin()
pair = torch.stack([c, s], -1)  # [S, D/2, 2] (complex table as real pair)
cc = torch.stack([c, c], -1).view(1,S,1,D//2,2)
ss = torch.stack([-s, s], -1).view(1,S,1,D//2,2)
def ref(x):
    a = ang.double().view(1,S,1,-1); re, im = x.double().unflatten(-1,(-1,2)).unbind(-1)
    return torch.stack([re*a.cos()-im*a.sin(), re*a.sin()+im*a.cos()], -1).flatten(3)
R = (ref(q), ref(k))
def A(q, k):  # flip, tables inline from pair
    f = pair.view(1,S,1,D//2,2); fr, fi = f[...,0:1], f[...,1:2]
    tc = torch.cat([fr, fr], -1); ts = torch.cat([-fi, fi], -1)
    def r(x):
        x = x.float().unflatten(-1,(-1,2)); return (x*tc + x.flip(-1)*ts).flatten(3).type_as(q)
    return r(q), r(k)
def A2(q, k):  # flip, tables via stack of unbind
    f = pair.view(1,S,1,D//2,2); fr, fi = f.unbind(-1)
    tc = torch.stack([fr, fr], -1); ts = torch.stack([-fi, fi], -1)
    def r(x):
        x = x.float().unflatten(-1,(-1,2)); return (x*tc + x.flip(-1)*ts).flatten(3).type_as(q)
    return r(q), r(k)
def Bp(q, k):  # flip, precomputed
    def r(x):
        x = x.float().unflatten(-1,(-1,2)); return (x*cc + x.flip(-1)*ss).flatten(3).type_as(q)
    return r(q), r(k)
def E(q, k):  # unbind/stack
    f = pair.view(1,S,1,D//2,2); fr, fi = f.unbind(-1)
    def r(x):
        xr, xi = x.float().unflatten(-1,(-1,2)).unbind(-1)
        return torch.stack([xr*fr - xi*fi, xr*fi + xi*fr], -1).flatten(3).type_as(q)
    return r(q), r(k)
def W(q, k):  # where on last index
    f = pair.view(1,S,1,D//2,2); fr, fi = f[...,0:1], f[...,1:2]
    idx = torch.arange(2, device="cuda")
    def r(x):
        x = x.float().unflatten(-1,(-1,2)); xr, xi = x[...,0:1], x[...,1:2]
        return torch.where(idx == 0, xr*fr - xi*fi, xr*fi + xi*fr).flatten(3).type_as(q)
    return r(q), r(k)
def F(q, k):  # flip, single fused table product via 2x2 matrix form on pairs: out = x0*(c,s) + x1*(-s,c)
    f = pair.view(1,S,1,D//2,2); fr, fi = f[...,0:1], f[...,1:2]
    def r(x):
        x = x.float().unflatten(-1,(-1,2)); x0, x1 = x[...,0:1], x[...,1:2]
        return (x0*f + x1*torch.cat([-fi, fr], -1)).flatten(3).type_as(q)
    return r(q), r(k)
qo, ko = torch.empty_like(q), torch.empty_like(k)
def copy():
    qo.copy_(q); ko.copy_(k)
floor = triton.testing.do_bench(copy, warmup=50, rep=300, return_mode="median")*1e3
print(f"copy {floor:.1f} us", flush=True)
rows=[]
for cfg in ["default", "coord"]:
    for name, fn in [("A_flip_inline_cat", A), ("A2_flip_inline_stack", A2), ("B_flip_precomputed", Bp), ("E_unbind_stack", E), ("W_where", W), ("F_x0f_x1rot", F)]:
        torch._dynamo.reset()
        torch._inductor.config.coordinate_descent_tuning = (cfg == "coord")
        t=time.time()
        try:
            cf = torch.compile(fn); out = cf(q, k); torch.cuda.synchronize()
        except Exception as e:
            print(name, cfg, "failed", e); continue
        ct = time.time()-t
        err = (sum(float((o.double()-r).norm()**2) for o,r in zip(out,R))/sum(float(r.norm()**2) for r in R))**0.5
        us = triton.testing.do_bench(lambda: cf(q,k), warmup=50, rep=300, return_mode="median")*1e3
        rows.append((cfg, name, us, us/floor, err, ct)); print(rows[-1], flush=True)
print(f"| config | formulation | us | vs copy ({floor:.1f} us) | err | compile s |")
for r in rows: print(f"| {r[0]} | {r[1]} | {r[2]:.1f} | {r[3]:.2f} | {r[4]:.1e} | {r[5]:.0f} |")
