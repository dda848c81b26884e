"""The GPU suite: every number the papers claim at GPU scale, in one command a lease.

`python -m benchmarks.gpu --lease --carry .gpu-carry --out DIR` installs the
carried wheels and runs every row, those with no committed GPU result
(`benchmarks/gpu/results/`) first, inside 540 s, install included
(`_lease.py`). `--part speed` (the ratios researchers compare us on, each
beside its baseline in the same process) and `--part paper` (the experiments
whose claims need scale, each cut to fit) run one part each inside `--limit`
seconds (default 420). Every row runs in its own subprocess with its own time
budget: a row that would not fit the time left is skipped, a row that overruns
its budget is stopped, each with a note, and the suite goes on. Every
measurement is appended to `DIR/results.jsonl` as soon as it is made;
`DIR/results.md` (device, jax version, precision modes, date, one table per
row) is rewritten after every row. `--smoke` runs the same code paths at tiny
sizes (CI).

`python -m benchmarks.gpu.carry` prepares the wheels the GPU machine lacks and
prints the command to run there (docs/benchmarks.md, "GPU suite").
"""
