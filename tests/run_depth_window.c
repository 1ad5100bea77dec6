/* Description: a handler's call forwarded in proxy_forward's entry window
 * (after it stored its wait frame and before the call raises depth), and
 * left there on the proxy by a second handler's siglongjmp out of its wait
 * into the first, is cancelled, and the interrupted call is not queued
 * behind it.  A tracer (helpers/t_window.h) lands SIGUSR1 in the program's
 * getppid, whose handler reads stdin (forwarded: depth is still 0; nobody
 * writes yet), then sends SIGUSR2, whose handler siglongjmps out of that
 * read back into the first, which returns into the getppid.  Round 1:
 * just after proxy_forward stored its wait frame.  Round 2: just after the
 * first access of depth that follows (the old runtime's `if (t->depth >
 * 0)`; today's xadd, the raise itself).  Rounds 3-8: at each instruction
 * boundary of the window, found by single steps from the store until a
 * step raises depth (the round of that step lands just after the raise;
 * each later one at the window's last boundary, before the instruction
 * that raises).  That covers a test and a raise apart (a handler between
 * them: the getppid published the next number and waited behind the
 * read until the byte for main came, which the read took, and depth
 * stayed 1) and a compiled depth++ whose load and store are apart (the
 * read's raise is overwritten), whatever the compiler made of them.  Then
 * main's read must get the byte the tracer writes, every getppid must be
 * the kernel's, and the program must end as natively.  Both modes.
 * Timeout: 60 */
#include "helpers/t_window.h"

int main(int argc, char **argv)
{
	static const enum t_win_point points[] = { T_WIN_AFTER_STORE, T_WIN_AFTER_TEST, T_WIN_STEPS, T_WIN_STEPS,
						    T_WIN_STEPS, T_WIN_STEPS, T_WIN_STEPS, T_WIN_STEPS };
	enum { ROUNDS = sizeof(points) / sizeof(points[0]) };
	bool last = false;
	struct t_win_result res;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return t_win_workload(t_win_warm_getppid, t_win_a_getppid, ROUNDS);
	t_win_run(argv, "proxy_forward", SYS_getppid, points, ROUNDS, &res);
	t_win_check_common(&res, ROUNDS);
	/* the stepped rounds found the raise, and one landed on the window's
	 * last boundary, just before it */
	t_check(res.window_len > 0, "no single step after the store of the wait frame was seen to raise depth "
		"(rounds made: %d of %d)", res.rounds_done, ROUNDS);
	for (int i = 2; i < res.rounds_done && i < ROUNDS; i++)
		last |= res.window_len > 0 && res.step_at[i] == res.window_len - 1;
	if (res.rounds_done == ROUNDS)
		t_check(last, "no round landed on the window's last boundary before the raise (%d boundaries)",
			res.window_len);
	/* the old runtime's round 2: the getppid waited behind the read until
	 * the tracer's byte came (the read took it: main's poll, above, timed
	 * out); its result was still its own */
	if (res.said)
		t_check(res.a_bad == 0, "the rounds' getppid returned %ld wrong pid(s) (%ld ms)", res.a_bad, res.ms);
	return t_done();
}
