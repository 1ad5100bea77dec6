/* The region examples/rtl/mbuff_rt.c and mbuff_peer.c share by name. */
#ifndef MBUFF_SHARED_H
#define MBUFF_SHARED_H

#define MBUFF_NAME "rtl_demo"

struct shared {
	unsigned long seq;      /* odd while the RT side writes (a seqlock) */
	unsigned long period;   /* the RT thread's period count */
	long value;             /* gain * period */
	long gain;              /* set by the Linux peer */
};

#endif
