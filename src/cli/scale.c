/* detach scale: what a measured noise trace costs a bulk-synchronous MPI job
 * of 10^3 to 10^6 ranks and beyond (docs/scale.md): the closed form of
 * independent per-rank noise for every rank count, validated on SimGrid up
 * to 10^4 ranks.  The closed form, the sweep, the table, JSON and PNG are
 * Python (tools/detach_tools/scale.py, noise.py); the simulator is C++
 * (src/scale/scale_sim.cpp, one run per rank count). */
#include "cli/cli.h"

static int scale_main(int argc, char **argv)
{
	return cli_exec_python_tool("scale", argc, argv);
}

DETACH_VERB(verb_scale) = { "scale", "predict a noise trace's slowdown at 10^3..10^6 MPI ranks (closed form; SimGrid validates)", scale_main };
