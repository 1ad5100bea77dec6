"""detach bench --program chan: message cost between a detached thread and
Linux (docs/ipc.md).  bench/chan.c measures everything, interleaving its
configurations in every round; this module runs it, keeps its JSON and
writes chan.md with the project's targets beside the figures."""
from __future__ import annotations

import argparse
import os
import subprocess

from .. import paths
from ..errors import ToolError
from ..files import JsonObj, load_json
from .util import measurement_program, publish_summary

DIRS = ("detached_to_linux", "linux_to_detached", "round_trip")


def command(a: argparse.Namespace, out_json: str) -> list[str]:
    cmd = [paths.program("chan"), "-j", out_json,
           "-r", str(a.repeat_chan), "-s", str(a.samples or (5000 if a.quick else 20000))]
    if a.quick:
        cmd += ["-n", "500000"]
    if a.cpu is not None:
        cmd += ["-c", str(a.cpu)]
    if a.housekeeping:
        cmd += ["-H", str(min(a.housekeeping))]
    return cmd


def summary(doc: JsonObj) -> str:
    lat, tput = doc["latency_ns"], doc["throughput_msgs_per_s"]
    lines = [f"# detach bench --program chan",
             "",
             f"{doc['samples']} ping-pongs x {doc['rounds']} rounds, {doc['message_bytes']}-byte messages, "
             f"{doc['ring_bytes']:,}-byte rings, "
             f"detached side on CPU {doc['cpu']}, Linux side on CPU {doc['housekeeping_cpu']}; "
             "configurations interleaved in every round.",
             "One way: the receiver's TSC after its get minus the sender's before its put, read on two "
             "CPUs, so each direction carries the offset between their TSCs (with opposite signs; it may "
             "come out negative) and only the sum of the two is free of it. Round trip: the detached "
             "side's own TSC around its put and its get.",
             "",
             "| config | direction | p50 ns | p99 ns | p99.9 ns | max ns |",
             "|---|---|---|---|---|---|"]
    for cfg, dirs in lat.items():
        for d in DIRS:
            v = dirs[d]
            lines.append(f"| {cfg} | {d} | {v['p50']:,} | {v['p99']:,} | {v['p99.9']:,} | {v['max']:,} |")
    lines += ["", "| throughput (msgs/s) | median | min | max |", "|---|---|---|---|"]
    for name, v in tput.items():
        lines.append(f"| {name} | {v['median']:,} | {v['min']:,} | {v['max']:,} |")
    floor = lat["cacheline"]["round_trip"]["p50"]
    poll = lat["chan-poll"]["round_trip"]["p50"]
    d2l = tput["chan detached->linux"]["median"]
    lines += ["", "| round trip over the cache line's | p50 | p99 | p99.9 |", "|---|---|---|---|"]
    for cfg, dirs in lat.items():
        rt = dirs["round_trip"]
        if "p50_over_floor" in rt:
            lines.append(f"| {cfg} | {rt['p50_over_floor']:.2f} | {rt['p99_over_floor']:.2f} "
                         f"| {rt['p99.9_over_floor']:.2f} |")
    lines += ["", "Targets:",
              f"- detached put to a polling consumer's get within 1.5x of a bare cache-line round trip: "
              f"chan-poll round trip p50 {poll:,} ns = {poll / floor:.2f}x the cache line's {floor:,} ns "
              f"({'met' if poll <= 1.5 * floor else 'not met'})",
              f"- 64-byte messages at >= 10 million per second detached -> spinning Linux consumer: "
              f"{d2l / 1e6:.2f} M/s ({'met' if d2l >= 10e6 else 'not met'})", ""]
    return "\n".join(lines)


def run(a: argparse.Namespace) -> int:
    prog = measurement_program("chan")
    os.makedirs(a.out, exist_ok=True)
    out_json = os.path.join(a.out, "chan.json")
    rc = subprocess.run(command(a, out_json)).returncode
    if rc != 0:
        raise ToolError(f"{prog} failed (exit {rc})")
    doc = load_json(out_json)
    publish_summary(a.out, "chan", summary(doc), not a.no_print)
    return 0
