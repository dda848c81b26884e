"""The GPU suite: every number the papers claim at GPU scale, in two commands.

`python -m benchmarks.gpu --part speed --out DIR` (the ratios researchers
compare us on, each beside its baseline in the same process) and
`python -m benchmarks.gpu --part paper --out DIR` (the experiments whose claims
need scale, each cut to fit) each finish inside `--limit` seconds (default 420,
7 minutes). Every row runs in its own subprocess with its own time
budget: a row that would not fit the time left is skipped, a row that overruns
its budget is stopped, each with a note, and the suite goes on. Every
measurement is appended to `DIR/results.jsonl` as soon as it is made;
`DIR/results.md` (device, jax version, date, one table per row) is rewritten
after every row. `--smoke` runs the same code paths at tiny sizes (CI).

`python -m benchmarks.gpu.carry` prepares the wheels the GPU machine lacks and
prints the command to run there (docs/benchmarks.md, "GPU suite").
"""
