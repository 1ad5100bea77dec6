"""detach bench: orchestration, loads, tables and plots.

The measurement programs (bench/fwq.c, bench/ctlloop.c) compute every
statistic and write JSON; this package only runs them, reads their JSON,
and lays the numbers out.  Entry point: cli.py (via `detach bench`).
"""
