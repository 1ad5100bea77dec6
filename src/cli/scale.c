/* detach scale: what a measured noise trace costs a bulk-synchronous MPI job
 * of 10^3 to 10^6 ranks, simulated on SimGrid (docs/scale.md).  The
 * simulator is C++ (src/scale/scale_sim.cpp, one run per rank count); the
 * sweep, the closed form, the table, JSON and PNG are Python
 * (tools/detach_tools/scale.py). */
#include "cli/cli.h"

static int scale_main(int argc, char **argv)
{
	return cli_exec_python_tool("scale", argc, argv);
}

DETACH_VERB(verb_scale) = { "scale", "predict a noise trace's slowdown at 10^3..10^6 MPI ranks (SimGrid)", scale_main };
