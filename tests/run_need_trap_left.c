/* Description: rewrite mode: a call's request for the trap path survives a
 * handler's call made after the request and left by a second handler's
 * siglongjmp into the first.  The program's sigaltstack(NULL, &oss) at a
 * rewritten site asks for the trap path (it needs a frame); a tracer
 * (helpers/t_window.h) lands SIGUSR1 at the return of the runtime's
 * do_sigaltstack (entered with no frame: the trampoline's dispatch), after
 * the request was made and before the trampoline's dispatch reads it; the
 * handler reads stdin (forwarded; nobody writes yet); SIGUSR2's handler
 * siglongjmps out of that read into the first, which returns.  With the
 * request kept in the thread (need_trap, saved, cleared and put back around
 * each dispatch) the read's dispatch cleared it and, left, never put it
 * back: the sigaltstack returned 0 without running (oss not written).  The
 * oss must be what the same call wrote before the tracer came, main's read
 * must get the byte the tracer writes, every getppid must be the kernel's,
 * and the program must end as natively.  Skips in sud mode, where every
 * call has its frame and nothing is requested.
 * Timeout: 60 */
#include "helpers/t_window.h"

static stack_t first;

static void warm(void)
{
	memset(&first, 0x5a, sizeof(first));
	if (sigaltstack(NULL, &first))
		exit(30);
	t_win_warm_getppid();
}

/* 0: oss as the first call wrote it */
static long a_sigaltstack(void)
{
	stack_t oss;

	memset(&oss, 0xa5, sizeof(oss));
	if (sigaltstack(NULL, &oss))
		return 1;
	return oss.ss_sp != first.ss_sp || oss.ss_flags != first.ss_flags || oss.ss_size != first.ss_size ? 2 : 0;
}

int main(int argc, char **argv)
{
	static const enum t_win_point points[] = { T_WIN_AT_RETURN };
	const char *mode = getenv("DETACH_MODE");
	struct t_win_result res;

	(void)argc;
	if (getenv("T_WORKLOAD"))
		return t_win_workload(warm, a_sigaltstack, 1);
	if (!mode || strcmp(mode, "rewrite"))
		t_skip("sud mode: every call has its frame, no call asks for the trap path (rewrite mode only)");
	t_win_run(argv, "do_sigaltstack", SYS_sigaltstack, points, 1, &res);
	if (res.no_window)
		t_skip("the program's sigaltstack came to do_sigaltstack with a frame: its site was not rewritten, "
		       "no request for the trap path to lose");
	t_win_check_common(&res, 1);
	if (res.said)
		t_check(res.a_bad == 0, "sigaltstack(NULL, &oss) returned without writing oss as it had before: "
			"its request for the trap path was lost to the handler's read left by siglongjmp");
	return t_done();
}
