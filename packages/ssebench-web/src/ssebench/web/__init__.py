"""`ssebench web`: a local web page to watch runs live, read their grades, diffs and
dialogs, and open a terminal in a running run (on a backend that supports exec).

It works through the Backend interface only (`list_runs`, `logs`, `endpoint`,
`exec_argv`) and the recorded results under `results/` and `evals/`.
"""
