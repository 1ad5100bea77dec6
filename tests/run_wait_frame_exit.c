/* Description: a handler's call forwarded in proxy_forward's exit window
 * (between depth-- and the store that puts the caller's wait frame back),
 * and left there on the proxy by a second handler's siglongjmp out of its
 * wait into the first, keeps its wait frame, so that the next call cancels
 * it.  A tracer (helpers/t_window.h) lands SIGUSR1 in the program's getppid
 * just after depth's store of 0 after the wait; the handler reads stdin
 * (forwarded at depth 0; nobody writes yet); SIGUSR2's handler siglongjmps
 * out of that read into the first, which returns into the getppid's way
 * out.  At the getppid's return the tracer reads depth and wait_frame:
 * depth must be 1 and wait_frame the read's frame (below the getppid's).
 * The old runtime's unconditional store put the getppid's outer frame (0)
 * over the read's.  That check is the one that fails there: today's
 * dt_dispatch judges main's next call (from the thread's stack) as one
 * that left a wait whether wait_frame is the read's or 0 (call.h,
 * left_wait), cancels the read, and main's read gets the byte either way
 * (stack_of ranks 0 with the thread's stack).
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
	/* What the fix is about, read where it happens: A's way out, with the
	 * read H1 left on the proxy (depth 1), must leave wait_frame at the
	 * read's frame (below A's own), not put A's outer frame over it.
	 * Today's dt_dispatch (call.h, left_wait) takes the next call from the
	 * thread's stack for one that left a wait either way (A's outer frame
	 * is 0, or on the runtime's stack), so the byte check above does not
	 * see an overwritten frame: this one does. */
	t_check(res.back_seen[0], "the tracer did not see the round's getppid return");
	if (res.back_seen[0])
		t_check(res.back_depth[0] == 1 && res.back_frame[0] != res.a_outer[0] &&
			res.back_frame[0] < res.a_frame[0],
			"at the round's getppid's return: depth %d, wait_frame %#lx (its own frame %#lx, the outer "
			"frame it found at its entry %#lx); expected depth 1 and the frame of handler 1's read, "
			"left on the proxy (below its own): the way out put its outer frame over it",
			res.back_depth[0], (unsigned long)res.back_frame[0], (unsigned long)res.a_frame[0],
			(unsigned long)res.a_outer[0]);
	if (res.said)
		t_check(res.a_bad == 0, "the round's getppid returned a wrong pid");
	return t_done();
}
