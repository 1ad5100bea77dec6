/* scale_sim: a bulk-synchronous MPI job on SimGrid (S4U), its compute
 * disturbed by a measured noise trace.  Run by `detach scale`
 * (tools/detach_tools/scale.py, docs/scale.md); one simulation per run:
 *
 *   scale_sim --ranks N --iterations I --interval-ns T --collective C
 *             [--trace FILE [--cosched] [--seed S]]
 *             [--L-ns L] [--o-ns O] [--g-ns G] [--G-ns-per-byte B] [--bytes K]
 *
 * Each of the N ranks is an S4U actor on a host of its own.  I times it
 * computes for T, then joins the collective C (allreduce: binomial-tree
 * reduce to rank 0 and binomial broadcast back; barrier: the same with 0
 * bytes; bcast: the broadcast only).  The network is LogGP on SimGrid's
 * CM02 flow model over a star: a message of K bytes takes L + K*G on the
 * wire (two links of L/2 each, bandwidth 1/G, so no congestion unless
 * ranks share a link, which they do not); the sender spends o before the
 * message leaves, the receiver o after it arrived, and messages leave a
 * rank at least g apart.  Noise (LogGOPSim's way, Hoefler et al. SC'10):
 * the trace's detours occupy the CPU, so compute and the overheads o of a
 * rank take longer by the detours that fall into them; each rank starts at
 * a random offset into the trace (--cosched: all at the same offset), the
 * trace repeating.  Prints one JSON object: the simulated job time and the
 * cost of the run. */
#include <simgrid/s4u.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace sg4 = simgrid::s4u;

namespace {

struct Params {
	long ranks = 1000, iterations = 100;
	double interval = 1e-3;          /* seconds */
	std::string collective = "allreduce";
	std::string trace;
	bool cosched = false;
	unsigned long seed = 1;
	/* LogGP, seconds and seconds per byte (docs/scale.md for the sources) */
	double L = 5e-6, o = 1.5e-6, g = 1e-6, G = 0.67e-9;
	long bytes = 8;
};

Params P;

/* The trace: detours (start, duration) in seconds, sorted, and its span. */
std::vector<double> det_start, det_len;
double span = 0;
std::vector<double> offset;          /* per rank */

/* When a CPU activity of `work` seconds that starts at t ends on rank r:
 * every detour that begins before it is done delays it by its length (one
 * that is under way at t, by what is left of it). */
double noisy_end(long r, double t, double work)
{
	if (det_start.empty() || span <= 0)
		return t + work;
	double cur = t, rem = work;
	double base = std::floor((t + offset[r]) / span) * span - offset[r];   /* trace cycle holding t */
	size_t i = std::upper_bound(det_start.begin(), det_start.end(), t + offset[r] - (base + offset[r])) -
		   det_start.begin();
	if (i > 0)
		i--;                          /* one under way at t may reach into it */
	for (;;) {
		if (i >= det_start.size()) {  /* the trace repeats */
			i = 0;
			base += span;
		}
		double s = base + det_start[i], e = s + det_len[i];
		if (s >= cur + rem)
			return cur + rem;
		if (e > cur) {
			if (s > cur) {
				rem -= s - cur;
			}
			cur = e;
		}
		i++;
	}
}

struct Rank {
	long id;
	sg4::Mailbox* box;
	double next_send = 0;        /* g: earliest time the next message may leave */
};

std::vector<sg4::Mailbox*> boxes;
std::vector<sg4::Host*> hosts;
long payload_bytes() { return P.collective == "barrier" ? 0 : P.bytes; }

void cpu(long r, double work)
{
	double end = noisy_end(r, sg4::Engine::get_clock(), work);
	sg4::this_actor::sleep_until(end);
}

void send(Rank& me, long to)
{
	double now = sg4::Engine::get_clock();
	if (now < me.next_send)
		sg4::this_actor::sleep_until(me.next_send);
	cpu(me.id, P.o);
	me.next_send = sg4::Engine::get_clock() + P.g;
	/* eager: the message travels now (the receiver's mailbox has a
	 * permanent receiver), the sender does not wait for it */
	static int token;
	boxes[to]->put_init(&token, payload_bytes())->detach();
}

void recv(Rank& me)
{
	me.box->get<int>();
	cpu(me.id, P.o);
}

/* binomial tree rooted at 0: reduce (children to parent) */
void reduce(Rank& me)
{
	long r = me.id;
	for (long mask = 1; mask < P.ranks; mask <<= 1) {
		if (r & mask) {
			send(me, r - mask);
			return;
		}
		if (r + mask < P.ranks)
			recv(me);
	}
}

void bcast(Rank& me)
{
	long r = me.id, mask = 1;
	while (mask < P.ranks && !(r & mask))
		mask <<= 1;
	if (r != 0)
		recv(me);                     /* from r - mask */
	for (mask >>= 1; mask > 0; mask >>= 1)
		if (r + mask < P.ranks && (r == 0 || mask < (r & -r)))
			send(me, r + mask);
}

double end_time = 0;

void rank_main(long id)
{
	Rank me{ id, boxes[id] };
	me.box->set_receiver(sg4::Actor::self());
	for (long it = 0; it < P.iterations; it++) {
		cpu(id, P.interval);
		if (P.collective != "bcast")
			reduce(me);
		bcast(me);
	}
	end_time = std::max(end_time, sg4::Engine::get_clock());
	me.box->set_receiver(nullptr);
}

void read_trace(const std::string& path)
{
	std::ifstream f(path);
	std::string line;
	std::vector<std::pair<double, double>> d;
	if (!f) {
		fprintf(stderr, "scale_sim: cannot read %s\n", path.c_str());
		exit(1);
	}
	while (std::getline(f, line)) {
		double s, l;
		if (line.empty() || line[0] == '#')
			continue;
		if (sscanf(line.c_str(), "%lf\t%lf", &s, &l) != 2 || s < 0 || l < 0) {
			fprintf(stderr, "scale_sim: %s: bad line '%s' (want <start_ns>\\t<duration_ns>)\n",
				path.c_str(), line.c_str());
			exit(1);
		}
		d.emplace_back(s * 1e-9, l * 1e-9);
	}
	std::sort(d.begin(), d.end());
	for (auto& [s, l] : d) {
		span = std::max(span, s + l);
		if (l > 0) {
			det_start.push_back(s);
			det_len.push_back(l);
		}
	}
}

double num(const char* opt, const char* v)
{
	char* end;
	double x = strtod(v, &end);
	if (*end || !(x >= 0)) {
		fprintf(stderr, "scale_sim: bad value '%s' for %s\n", v, opt);
		exit(2);
	}
	return x;
}

} // namespace

int main(int argc, char** argv)
{
	for (int i = 1; i < argc; i++) {
		std::string a = argv[i];
		auto val = [&]() -> const char* {
			if (i + 1 >= argc) {
				fprintf(stderr, "scale_sim: %s needs a value\n", a.c_str());
				exit(2);
			}
			return argv[++i];
		};
		if (a == "--ranks") P.ranks = (long)num("--ranks", val());
		else if (a == "--iterations") P.iterations = (long)num("--iterations", val());
		else if (a == "--interval-ns") P.interval = num("--interval-ns", val()) * 1e-9;
		else if (a == "--collective") P.collective = val();
		else if (a == "--trace") P.trace = val();
		else if (a == "--cosched") P.cosched = true;
		else if (a == "--seed") P.seed = (unsigned long)num("--seed", val());
		else if (a == "--L-ns") P.L = num("--L-ns", val()) * 1e-9;
		else if (a == "--o-ns") P.o = num("--o-ns", val()) * 1e-9;
		else if (a == "--g-ns") P.g = num("--g-ns", val()) * 1e-9;
		else if (a == "--G-ns-per-byte") P.G = num("--G-ns-per-byte", val()) * 1e-9;
		else if (a == "--bytes") P.bytes = (long)num("--bytes", val());
		else {
			fprintf(stderr, "scale_sim: unknown option %s\n", a.c_str());
			return 2;
		}
	}
	if (P.ranks < 1 || P.iterations < 1 ||
	    (P.collective != "allreduce" && P.collective != "barrier" && P.collective != "bcast")) {
		fprintf(stderr, "scale_sim: need --ranks >= 1, --iterations >= 1, --collective allreduce|barrier|bcast\n");
		return 2;
	}
	if (!P.trace.empty())
		read_trace(P.trace);
	std::mt19937_64 rng(P.seed);
	std::uniform_real_distribution<double> u(0.0, span > 0 ? span : 1.0);
	double shared = u(rng);
	offset.resize(P.ranks);
	for (long r = 0; r < P.ranks; r++)
		offset[r] = P.cosched ? shared : u(rng);

	/* SimGrid: quiet, the plain flow model (CM02: a message takes latency
	 * + size / bandwidth once its factors are 1), small actor stacks for many ranks. */
	int sg_argc = 3;
	char quiet[] = "--log=root.thres:critical", noconf[] = "--log=xbt_cfg.thres:critical";
	char* sg_argv[] = { argv[0], quiet, noconf, nullptr };
	sg4::Engine e(&sg_argc, sg_argv);
	sg4::Engine::set_config("network/model:CM02");
	sg4::Engine::set_config("network/crosstraffic:0");
	sg4::Engine::set_config("network/maxmin-selective-update:1");
	sg4::Engine::set_config("cpu/maxmin-selective-update:1");
	sg4::Engine::set_config("contexts/stack-size:16");
	sg4::Engine::set_config("contexts/guard-size:0");
	sg4::Engine::set_config("network/latency-factor:1");     /* CM02's defaults are 13.01 and */
	sg4::Engine::set_config("network/bandwidth-factor:1");   /* 0.97, fitted to TCP: LogGP has none */

	auto* zone = sg4::create_star_zone("job");
	hosts.resize(P.ranks);
	boxes.resize(P.ranks);
	for (long r = 0; r < P.ranks; r++) {
		std::string n = std::to_string(r);
		hosts[r] = zone->create_host("h" + n, 1e9);
		/* each message crosses the sender's and the receiver's link: L/2 each */
		auto* link = zone->create_split_duplex_link("l" + n, 1.0 / P.G)->set_latency(P.L / 2);
		zone->add_route(hosts[r]->get_netpoint(), nullptr, nullptr, nullptr,
				{ { link, sg4::LinkInRoute::Direction::UP } }, true);
		boxes[r] = sg4::Mailbox::by_name(n);
	}
	zone->seal();
	for (long r = 0; r < P.ranks; r++)
		sg4::Actor::create("rank" + std::to_string(r), hosts[r], rank_main, r);
	e.run();

	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("{\"ranks\": %ld, \"iterations\": %ld, \"interval_ns\": %.0f, \"collective\": \"%s\", "
	       "\"cosched\": %s, \"trace\": \"%s\", \"detours\": %zu, \"span_ns\": %.0f, "
	       "\"job_time_ns\": %.3f, \"iteration_ns\": %.3f, \"max_rss_kib\": %ld, \"cpu_s\": %.2f}\n",
	       P.ranks, P.iterations, P.interval * 1e9, P.collective.c_str(), P.cosched ? "true" : "false",
	       P.trace.c_str(), det_start.size(), span * 1e9, end_time * 1e9, end_time * 1e9 / (double)P.iterations,
	       ru.ru_maxrss, (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
	       ru.ru_stime.tv_usec * 1e-6);
	return 0;
}
