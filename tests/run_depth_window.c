/* Description: a handler's call forwarded in proxy_forward's entry window
 * (before the call raises depth), and left there on the proxy by a second
 * handler's siglongjmp out of its wait into the first, is cancelled, and the
 * interrupted call is not queued behind it.  A tracer (helpers/t_window.h)
 * lands SIGUSR1 in the program's getppid, whose handler reads stdin
 * (forwarded: depth is still 0; nobody writes yet), then sends SIGUSR2,
 * whose handler siglongjmps out of that read back into the first, which
 * returns into the getppid.  Round 1: just after proxy_forward stored its
 * wait frame (both the old runtime's test of depth and the new one's xadd
 * see the read left behind).  Round 2: just after the first access of
 * depth that follows: the old runtime's `if (t->depth > 0)`, whose
 * depth++ came after it (the handler's read went unseen: the getppid
 * published the next number and waited behind the read until the byte
 * for main came, which the read took, and depth stayed 1); the new one's
 * xadd (the handler's read then runs on the thread, and its siglongjmp
 * leaves nothing).  Then main's read must get the byte the tracer writes,
 * every getppid must be the kernel's, and the program must end as
 * natively.  Both modes.
 * Timeout: 60 */
#include "helpers/t_window.h"

int main(int argc, char **argv)
{
	static const enum t_win_point points[] = { T_WIN_AFTER_STORE, T_WIN_AFTER_TEST };
	struct t_win_result res;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return t_win_workload(t_win_warm_getppid, t_win_a_getppid, 2);
	t_win_run(argv, "proxy_forward", SYS_getppid, points, 2, &res);
	t_win_check_common(&res, 2);
	/* the old runtime's round 2: the getppid waited behind the read until
	 * the tracer's byte came (the read took it: main's poll, above, timed
	 * out); its result was still its own */
	if (res.said)
		t_check(res.a_bad == 0, "the rounds' getppid returned %ld wrong pid(s) (%ld ms)", res.a_bad, res.ms);
	return t_done();
}
