/* Layer 2a (services, docs/architecture.md): classic BPF as seccomp accepts
 * it, checked and run in user space (cbpf.c).  Nothing here enters the
 * kernel: cbpf_run is on the interception path. */
#ifndef DETACH_RUNTIME_CBPF_H
#define DETACH_RUNTIME_CBPF_H

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stdint.h>

#include "runtime/sys.h"

/* Checks a program as the kernel checks a seccomp filter (bpf_check_classic,
 * then seccomp_check_filter) and rewrites it in place as the kernel does
 * (the LEN loads become the constant 64).  0 or -EINVAL. */
int cbpf_check(struct sock_filter *insns, unsigned len) DT_HIDDEN;
/* Whether a checked program returns ALLOW for call nr of arch whatever the
 * arguments and the address: followed with nr and arch alone, it reaches
 * RET ALLOW without reading anything else (the kernel's action cache,
 * seccomp_is_const_allow: such a call need not run the program). */
bool cbpf_allows_always(const struct sock_filter *insns, unsigned len, int nr, uint32_t arch) DT_HIDDEN;
/* Runs a checked program on d: the 32-bit value it returns. */
uint32_t cbpf_run(const struct sock_filter *insns, const struct seccomp_data *d) DT_HIDDEN;

#endif
