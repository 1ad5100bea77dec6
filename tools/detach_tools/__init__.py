"""detach's Python tools: the benchmark orchestration behind `detach bench`
(detach_tools.bench), the rt-tests latency comparison (detach_tools.latency)
and the forwarding-cost comparison (detach_tools.fwdcost).

    python3 -m detach_tools {bench,latency,fwdcost} [OPTIONS]

or the console scripts detach-bench, detach-latency, detach-fwdcost that
tools/pyproject.toml declares.  The measurement programs are C and write
JSON; these tools run them, interleave configurations and lay numbers out.
"""

# The "format" of the common JSON header, as DETACH_JSON_FORMAT in
# src/lib/util.h: the layouts docs/schema/ describes.
JSON_FORMAT = 1
