# ab_table.py DIR: eager's time over each variant's, per (op, dtype, dir), from ab_<variant>_<round>.json
import json, sys, glob, collections
rows = collections.defaultdict(dict)
variants = []
for f in sorted(glob.glob(f'{sys.argv[1]}/ab_*_*.json')):
    v, r = f.rsplit('/', 1)[1][3:-5].rsplit('_', 1)
    if v not in variants: variants.append(v)
    for row in json.load(open(f))['rows']:
        rows[(row['op'], row['dtype'], row['dir'])].setdefault(v, []).append((row['ms'] * 1000, row['ratio'], row['frac_copy']))
order = [v for v in ('head', 'v1', 'v2', 'single') if v in variants]
print('op dtype dir | ' + ' | '.join(f'{v}: us (x eager)' for v in order))
for key, by in rows.items():
    cells = []
    for v in order:
        xs = by.get(v, [])
        cells.append(' / '.join(f'{us:.1f} ({r:.3f})' if r else f'{us:.1f}' for us, r, _ in xs))
    print(' '.join(key), '|', ' | '.join(cells))
