"""CPU lists as the kernel writes them ("0-3,8"), for every tool."""


def parse_cpulist(s):
    cpus = set()
    s = s.strip()
    if not s:
        return cpus
    for part in s.split(","):
        if "-" in part:
            a, b = part.split("-", 1)
            a, b = int(a), int(b)
            if b < a:
                raise ValueError(f"bad CPU range '{part}'")
            cpus.update(range(a, b + 1))
        else:
            cpus.add(int(part))
    return cpus


def format_cpulist(cpus):
    cpus = sorted(cpus)
    out, i = [], 0
    while i < len(cpus):
        j = i
        while j + 1 < len(cpus) and cpus[j + 1] == cpus[j] + 1:
            j += 1
        out.append(str(cpus[i]) if i == j else f"{cpus[i]}-{cpus[j]}")
        i = j + 1
    return ",".join(out)


def online_cpus():
    with open("/sys/devices/system/cpu/online") as f:
        return parse_cpulist(f.read())
