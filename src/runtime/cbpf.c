/* Classic BPF as seccomp accepts it: the check at install, the run at every
 * call (sandbox.c).  The check is the kernel's, in its order, with its
 * answer (EINVAL): bpf_check_classic (net/core/filter.c: known opcodes,
 * constant divisors and shifts, scratch slots, jumps inside the program, a
 * RET last, no scratch slot read before every path to it stored it), then
 * seccomp_check_filter (kernel/seccomp.c: the opcodes seccomp allows; a
 * load from struct seccomp_data 32-bit aligned and inside it).
 *
 * The run is the kernel's meaning of each instruction (its classic to eBPF
 * conversion): A and X 32 bits, unsigned; a load from seccomp_data in the
 * machine's byte order; a division by X == 0 ends the program with 0
 * (SECCOMP_RET_KILL_THREAD); a shift by X takes its low five bits.  It makes
 * no call and touches no vector register (-mgeneral-regs-only): it runs on
 * the interception path. */
#include "runtime/cbpf.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#define MEMWORDS 16          /* BPF_MEMWORDS */

/* The opcodes seccomp allows, after its rewriting of the LEN loads. */
static bool seccomp_allows(uint16_t code)
{
	switch (code) {
	case BPF_RET | BPF_K: case BPF_RET | BPF_A:
	case BPF_ALU | BPF_ADD | BPF_K: case BPF_ALU | BPF_ADD | BPF_X:
	case BPF_ALU | BPF_SUB | BPF_K: case BPF_ALU | BPF_SUB | BPF_X:
	case BPF_ALU | BPF_MUL | BPF_K: case BPF_ALU | BPF_MUL | BPF_X:
	case BPF_ALU | BPF_DIV | BPF_K: case BPF_ALU | BPF_DIV | BPF_X:
	case BPF_ALU | BPF_AND | BPF_K: case BPF_ALU | BPF_AND | BPF_X:
	case BPF_ALU | BPF_OR | BPF_K: case BPF_ALU | BPF_OR | BPF_X:
	case BPF_ALU | BPF_XOR | BPF_K: case BPF_ALU | BPF_XOR | BPF_X:
	case BPF_ALU | BPF_LSH | BPF_K: case BPF_ALU | BPF_LSH | BPF_X:
	case BPF_ALU | BPF_RSH | BPF_K: case BPF_ALU | BPF_RSH | BPF_X:
	case BPF_ALU | BPF_NEG:
	case BPF_LD | BPF_IMM: case BPF_LDX | BPF_IMM:
	case BPF_MISC | BPF_TAX: case BPF_MISC | BPF_TXA:
	case BPF_LD | BPF_MEM: case BPF_LDX | BPF_MEM:
	case BPF_ST: case BPF_STX:
	case BPF_JMP | BPF_JA:
	case BPF_JMP | BPF_JEQ | BPF_K: case BPF_JMP | BPF_JEQ | BPF_X:
	case BPF_JMP | BPF_JGE | BPF_K: case BPF_JMP | BPF_JGE | BPF_X:
	case BPF_JMP | BPF_JGT | BPF_K: case BPF_JMP | BPF_JGT | BPF_X:
	case BPF_JMP | BPF_JSET | BPF_K: case BPF_JMP | BPF_JSET | BPF_X:
		return true;
	}
	return false;
}

/* Opcodes classic BPF knows at all (bpf_check_classic's table), less the
 * packet loads, which seccomp refuses just after with the same EINVAL. */
static bool classic_known(uint16_t code)
{
	return seccomp_allows(code) || code == (BPF_LD | BPF_W | BPF_ABS) ||
	       code == (BPF_LD | BPF_W | BPF_LEN) || code == (BPF_LDX | BPF_W | BPF_LEN) ||
	       code == (BPF_ALU | BPF_MOD | BPF_K) || code == (BPF_ALU | BPF_MOD | BPF_X);
}

static bool is_cond_jump(uint16_t code)
{
	return BPF_CLASS(code) == BPF_JMP && BPF_OP(code) != BPF_JA;
}

/* No scratch slot is read before it was stored on every path to the read
 * (the kernel's check_load_and_stores). */
static int check_scratch(const struct sock_filter *f, unsigned len)
{
	uint16_t masks[BPF_MAXINSNS], valid = 0;

	memset(masks, 0xff, len * sizeof(masks[0]));
	for (unsigned pc = 0; pc < len; pc++) {
		valid &= masks[pc];
		switch (f[pc].code) {
		case BPF_ST:
		case BPF_STX:
			valid |= (uint16_t)(1u << f[pc].k);
			break;
		case BPF_LD | BPF_MEM:
		case BPF_LDX | BPF_MEM:
			if (!(valid & (1u << f[pc].k)))
				return -EINVAL;
			break;
		case BPF_JMP | BPF_JA:
			masks[pc + 1 + f[pc].k] &= valid;
			valid = 0xffff;
			break;
		default:
			if (is_cond_jump(f[pc].code)) {
				masks[pc + 1 + f[pc].jt] &= valid;
				masks[pc + 1 + f[pc].jf] &= valid;
				valid = 0xffff;
			}
		}
	}
	return 0;
}

int cbpf_check(struct sock_filter *f, unsigned len)
{
	if (len == 0 || len > BPF_MAXINSNS)
		return -EINVAL;
	/* bpf_check_classic */
	for (unsigned pc = 0; pc < len; pc++) {
		uint16_t c = f[pc].code;
		uint32_t k = f[pc].k;

		if (!classic_known(c))
			return -EINVAL;
		if ((c == (BPF_ALU | BPF_DIV | BPF_K) || c == (BPF_ALU | BPF_MOD | BPF_K)) && k == 0)
			return -EINVAL;
		if ((c == (BPF_ALU | BPF_LSH | BPF_K) || c == (BPF_ALU | BPF_RSH | BPF_K)) && k >= 32)
			return -EINVAL;
		if ((c == (BPF_LD | BPF_MEM) || c == (BPF_LDX | BPF_MEM) || c == BPF_ST || c == BPF_STX) &&
		    k >= MEMWORDS)
			return -EINVAL;
		if (c == (BPF_JMP | BPF_JA) && k >= len - pc - 1)
			return -EINVAL;
		if (is_cond_jump(c) && c != (BPF_JMP | BPF_JA) &&
		    (pc + f[pc].jt + 1 >= len || pc + f[pc].jf + 1 >= len))
			return -EINVAL;
	}
	if (f[len - 1].code != (BPF_RET | BPF_K) && f[len - 1].code != (BPF_RET | BPF_A))
		return -EINVAL;
	if (check_scratch(f, len))
		return -EINVAL;
	/* seccomp_check_filter: the LEN loads become the constant, the ABS load
	 * stays ours (it reads struct seccomp_data) */
	for (unsigned pc = 0; pc < len; pc++) {
		switch (f[pc].code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (f[pc].k >= sizeof(struct seccomp_data) || (f[pc].k & 3))
				return -EINVAL;
			continue;
		case BPF_LD | BPF_W | BPF_LEN:
			f[pc].code = BPF_LD | BPF_IMM;
			f[pc].k = sizeof(struct seccomp_data);
			continue;
		case BPF_LDX | BPF_W | BPF_LEN:
			f[pc].code = BPF_LDX | BPF_IMM;
			f[pc].k = sizeof(struct seccomp_data);
			continue;
		}
		if (!seccomp_allows(f[pc].code))
			return -EINVAL;
	}
	return 0;
}

bool cbpf_allows_always(const struct sock_filter *f, unsigned len, int nr, uint32_t arch)
{
	uint32_t a = 0;

	for (unsigned pc = 0; pc < len; pc++) {
		const struct sock_filter *p = &f[pc];
		bool taken;

		switch (p->code) {
		case BPF_LD | BPF_W | BPF_ABS:
			if (p->k == offsetof(struct seccomp_data, nr))
				a = (uint32_t)nr;
			else if (p->k == offsetof(struct seccomp_data, arch))
				a = arch;
			else
				return false;   /* an argument or the address: not constant */
			break;
		case BPF_ALU | BPF_AND | BPF_K:
			a &= p->k;
			break;
		case BPF_JMP | BPF_JA:
			pc += p->k;
			break;
		case BPF_JMP | BPF_JEQ | BPF_K:
		case BPF_JMP | BPF_JGE | BPF_K:
		case BPF_JMP | BPF_JGT | BPF_K:
		case BPF_JMP | BPF_JSET | BPF_K:
			taken = BPF_OP(p->code) == BPF_JEQ ? a == p->k :
				BPF_OP(p->code) == BPF_JGE ? a >= p->k :
				BPF_OP(p->code) == BPF_JGT ? a > p->k : (a & p->k) != 0;
			pc += taken ? p->jt : p->jf;
			break;
		case BPF_RET | BPF_K:
			return p->k == SECCOMP_RET_ALLOW;
		default:
			return false;           /* anything else: the filter must run */
		}
	}
	return false;
}

static uint32_t alu(uint16_t op, uint32_t a, uint32_t v)
{
	switch (op) {
	case BPF_ADD: return a + v;
	case BPF_SUB: return a - v;
	case BPF_MUL: return a * v;
	case BPF_DIV: return a / v;      /* v != 0: checked, or tested by the caller */
	case BPF_AND: return a & v;
	case BPF_OR:  return a | v;
	case BPF_XOR: return a ^ v;
	case BPF_LSH: return a << (v & 31);
	case BPF_RSH: return a >> (v & 31);
	case BPF_NEG: return -a;
	}
	return a;
}

uint32_t cbpf_run(const struct sock_filter *f, const struct seccomp_data *d)
{
	uint32_t a = 0, x = 0, mem[MEMWORDS];
	const char *data = (const char *)d;

	for (const struct sock_filter *p = f;; p++) {
		uint32_t k = p->k, v;

		switch (BPF_CLASS(p->code)) {
		case BPF_LD:
			if (BPF_MODE(p->code) == BPF_ABS)
				memcpy(&a, data + k, 4);
			else
				a = BPF_MODE(p->code) == BPF_MEM ? mem[k] : k;
			break;
		case BPF_LDX:
			x = BPF_MODE(p->code) == BPF_MEM ? mem[k] : k;
			break;
		case BPF_ST:
			mem[k] = a;
			break;
		case BPF_STX:
			mem[k] = x;
			break;
		case BPF_ALU:
			v = BPF_SRC(p->code) == BPF_X ? x : k;
			if (BPF_OP(p->code) == BPF_DIV && v == 0)
				return 0;
			a = alu(BPF_OP(p->code), a, v);
			break;
		case BPF_JMP:
			v = BPF_SRC(p->code) == BPF_X ? x : k;
			switch (BPF_OP(p->code)) {
			case BPF_JA:   p += k; break;
			case BPF_JEQ:  p += a == v ? p->jt : p->jf; break;
			case BPF_JGT:  p += a > v ? p->jt : p->jf; break;
			case BPF_JGE:  p += a >= v ? p->jt : p->jf; break;
			case BPF_JSET: p += (a & v) ? p->jt : p->jf; break;
			}
			break;
		case BPF_RET:
			return BPF_RVAL(p->code) == BPF_A ? a : k;
		case BPF_MISC:
			if (BPF_MISCOP(p->code) == BPF_TAX)
				x = a;
			else
				a = x;
			break;
		}
	}
}
