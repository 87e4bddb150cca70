import re, sys
# Walk a kernel's SASS along sin's fast path: a predicate set by "FSETP.GE ... |x|, 105615" is false
# (|x| small), "FSETP.NEU ... +INF" true; other predicated branches not taken, unconditional taken; stop at EXIT.
ins = []
for l in open(sys.argv[1]):
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;', l)
    if m: ins.append((int(m.group(1), 16), m.group(2)))
addr = {a: i for i, (a, _) in enumerate(ins)}
known = {}
i, count, hist = 0, 0, {}
while i < len(ins) and count < 5000:
    a, t = ins[i]; count += 1
    m = re.match(r'FSETP\.(\w+)\.AND (P\d), PT, .*105615', t)
    if m: known[m.group(2)] = False
    m = re.match(r'FSETP\.NEU\.AND (P\d), PT, .*\+INF', t)
    if m: known[m.group(1)] = True
    body = re.sub(r'^@!?P\w+ ', '', t); op = body.split()[0]
    hist[op] = hist.get(op, 0) + 1
    if body.startswith('EXIT') and not t.startswith('@'): break
    m = re.search(r'BRA (0x[0-9a-f]+)', t)
    if m:
        pm = re.match(r'@(!?)(P\d)', t)
        take = True
        if pm:
            v = known.get(pm.group(2))
            take = False if v is None else (v != (pm.group(1) == '!'))
        if take: i = addr[int(m.group(1), 16)]; continue
    i += 1
print(count, 'instructions;', ', '.join(f'{k} {v}' for k, v in sorted(hist.items(), key=lambda kv: -kv[1])[:30]))
