"""Executes every notebook in notebooks/ headless against the committed data,
after checking that none is committed with outputs (outputs are results of a
run, not source). Exit status 1 names the notebook and cell that failed.
Run with the virtual environment scripts/setup.sh makes: .venv/bin/python."""
import pathlib
import sys
import time

import nbformat
from nbclient import NotebookClient

root = pathlib.Path(__file__).resolve().parent.parent
books = sorted((root / "notebooks").glob("*.ipynb"))
if not books:
    sys.exit("notebooks: none found in notebooks/")
failed = []
for path in books:
    nb = nbformat.read(path, as_version=4)
    dirty = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and (c.outputs or c.execution_count)]
    if dirty:
        failed.append(f"{path.name}: committed with outputs in cells {dirty}; clear them (Jupyter: Clear All Outputs)")
        continue
    t0 = time.time()
    try:
        NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    except Exception as e:  # nbclient raises CellExecutionError with the cell's traceback
        failed.append(f"{path.name}: {e}")
        continue
    print(f"notebooks: {path.name} ran in {time.time() - t0:.1f} s")
if failed:
    print("\n".join(failed), file=sys.stderr)
    sys.exit(1)
