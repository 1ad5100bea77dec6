"""detach's Python tools: the benchmark orchestration behind `detach bench`
(detach_tools.bench), the noise model behind `detach scale`
(detach_tools.scale), the rt-tests latency comparison (detach_tools.latency)
and the cost comparisons of forwarded calls and of spawning
(detach_tools.fwdcost, detach_tools.spawncost).

    python3 -m detach_tools {bench,scale,latency,fwdcost,spawncost} [OPTIONS]

or the console scripts detach-bench, detach-scale, detach-latency,
detach-fwdcost and detach-spawncost that tools/pyproject.toml declares.  The measurement programs are C and write
JSON; these tools run them, interleave configurations and lay numbers out.
"""

# The "format" of the common JSON header, as DETACH_JSON_FORMAT in
# src/lib/util.h: the layouts docs/schema/ describes.
JSON_FORMAT = 1
