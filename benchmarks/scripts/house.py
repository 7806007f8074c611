"""The house of src/aotcuda at a git revision: modules, lines, the package root, modules over 500 lines, and
the import edges between its rooms (the consolidation of issue 25 compared a4f010d with its result).

    python3 benchmarks/scripts/house.py REV
"""
import ast
import collections
import subprocess
import sys
rev = sys.argv[1]
files = [f for f in subprocess.check_output(["git","ls-tree","-r","--name-only",rev,"src/aotcuda"],text=True).split() if f.endswith(".py")]
lines = 0; edges = collections.Counter(); root = []
def room(f):
    parts = f.split("/")[2:]
    return parts[0][:-3] if len(parts) == 1 else parts[0] + "/"
for f in files:
    text = subprocess.check_output(["git","show",f"{rev}:{f}"],text=True)
    lines += text.count("\n")
    if len(f.split("/")) == 3: root.append(f.split("/")[-1])
    for node in ast.walk(ast.parse(text)):
        mods = []
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("aotcuda"): mods=[node.module]
        elif isinstance(node, ast.Import): mods=[a.name for a in node.names if a.name.startswith("aotcuda")]
        for m in mods:
            p = m.split(".")
            target = p[1] + "/" if len(p) > 2 or (len(p)==2 and p[1] in ("lowering","passes","runtime","serving","models")) else (p[1] if len(p)>1 else "__init__")
            a = room(f)
            if a != target: edges[(a, target)] += 1
print(f"{rev}: {len(files)} modules, {lines} lines; package root: {' '.join(sorted(root))}")
big = [(subprocess.check_output(['git','show',f'{rev}:{f}'],text=True).count(chr(10)), f) for f in files]
print("over 500 lines:", [f"{f} {n}" for n, f in sorted(big) if n > 500])
for (a, b), n in sorted(edges.items()): print(f"  {a:24s} -> {b}")
