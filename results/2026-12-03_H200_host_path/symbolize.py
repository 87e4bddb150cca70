# Names the host sampler's samples (host_sampler.cpp): addresses in the program by addr2line on the
# unstripped build of it, the C library's by its dynamic symbols (nm -D on the GPU machine: internal
# functions count under the exported symbol before them), others by library.
# python3 symbolize.py SAMPLES LIBC_SYMBOLS PROGRAM [TOP]
import bisect, collections, subprocess, sys

samples, libc_symbols, program = sys.argv[1:4]
top = int(sys.argv[4]) if len(sys.argv) > 4 else 40
symbols = sorted((int(p[0], 16), p[2]) for p in (l.split() for l in open(libc_symbols)) if len(p) == 3 and p[1] in 'TtWi')
starts = [s[0] for s in symbols]
maps, addresses = [], []
for line in open(samples):
    if line.startswith('map '):
        fields = line[4:].split()
        lo, hi = (int(x, 16) for x in fields[0].split('-'))
        maps.append((lo, hi, int(fields[2], 16), fields[5] if len(fields) > 5 else '[anon]'))
    else:
        addresses.append(int(line, 16))

def base_of(test):
    return min(lo - off for lo, hi, off, name in maps if test(name))

program_base = base_of(lambda n: n.endswith('cuda_chain'))
libc_base = base_of(lambda n: 'libc.so' in n)
own, counts = [], collections.Counter()
for a in addresses:
    region = next((m for m in maps if m[0] <= a < m[1]), None)
    name = region[3] if region else '?'
    if name.endswith('cuda_chain'):
        own.append(a - program_base)
    elif 'libc.so' in name:
        counts['libc: ' + symbols[bisect.bisect_right(starts, a - libc_base) - 1][1]] += 1
    else:
        counts[name.split('/')[-1]] += 1
lines = subprocess.run(['addr2line', '-f', '-C', '-e', program] + [hex(a) for a in own],
                       capture_output=True, text=True).stdout.split('\n')
for i in range(len(own)):
    counts[lines[2 * i]] += 1
print(f'{len(addresses)} samples')
for name, c in counts.most_common(top):
    print(f'{100.0 * c / len(addresses):6.1f}%  {name[:110]}')
