# sin_sass.py SASSFILE OUT: the bfloat16 and float16 sin forward kernels' SASS, one file each
import re, sys
text = open(sys.argv[1]).read()
for f in re.split(r'\n\s*(?:Function : )?(?=_Z)', text):
    head = f.split('\n')[0]
    for tag, dt in (('8bfloat16', 'bf16'), ('7float16', 'f16')):
        if 'ForwardFnILNS_2OpE13EN' in head and 'S_' + tag in head.replace('NS_', 'S_'):
            open(f'{sys.argv[2]}_{dt}.sass', 'w').write(f)
