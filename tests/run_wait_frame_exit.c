/* Description: a handler's call forwarded in proxy_forward's exit window
 * (between depth-- and the store that puts the caller's wait frame back),
 * and left there on the proxy by a second handler's siglongjmp out of its
 * wait into the first, keeps its wait frame, so that the next call cancels
 * it.  A tracer (helpers/t_window.h) lands SIGUSR1 in the program's getppid
 * just after depth's store of 0 after the wait; the handler reads stdin
 * (forwarded at depth 0; nobody writes yet); SIGUSR2's handler siglongjmps
 * out of that read into the first, which returns into the getppid's way
 * out.  The old runtime's unconditional store put the getppid's outer frame
 * (0) over the read's: with depth 1 the next calls found no call abandoned,
 * ran on the thread itself for good, and the read stayed on the proxy and
 * took the byte the tracer writes for main's read (main's poll timed out).
 * Main's read must get the byte, every getppid must be the kernel's, and
 * the program must end as natively.  Both modes.
 * Timeout: 60 */
#include "helpers/t_window.h"

int main(int argc, char **argv)
{
	static const enum t_win_point points[] = { T_WIN_AFTER_LOWER };
	struct t_win_result res;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return t_win_workload(t_win_warm_getppid, t_win_a_getppid, 1);
	t_win_run(argv, "proxy_forward", SYS_getppid, points, 1, &res);
	t_win_check_common(&res, 1);
	if (res.said)
		t_check(res.a_bad == 0, "the round's getppid returned a wrong pid");
	return t_done();
}
