#!/bin/sh
# Chapter 9's third edition from its MyST sources (this folder), for the branch
# ch9-third only: concatenate in order, convert with jupytext, drop jupytext's
# metadata, format and strip as the repository keeps notebooks. Delete this
# folder when the chapter lands on main.
set -e
cd "$(dirname "$0")/.."
PY=${PY:-/work/main/.venv/bin}
cat draft/a.md draft/b.md draft/c.md draft/d.md draft/e.md draft/f.md draft/g.md \
    draft/g2.md draft/h.md > draft/all.md
"$PY/jupytext" --to ipynb -o book/09_experiments.ipynb draft/all.md
"$PY/python" - <<'PYEOF'
import json
p = "book/09_experiments.ipynb"
nb = json.load(open(p))
nb["metadata"].pop("jupytext", None)
with open(p, "w") as f:
    json.dump(nb, f, indent=1, ensure_ascii=False)
    f.write("\n")
PYEOF
"$PY/ruff" format book/09_experiments.ipynb
"$PY/nbstripout" --keep-id book/09_experiments.ipynb
