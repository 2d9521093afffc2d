#!/usr/bin/env python3
"""Whether two source trees compile to the same device code, without a GPU.

Compiles every kernels/**/*.cu of each tree to PTX (sm_90a, the build's
flags, no line info), then compares the kernels as a multiset of bodies with
the names that moving code between files changes made neutral: mangled
symbols, the unnamed namespaces' per-file ids, branch labels and local
depots, which number by a function's place in its file. Prints the kernels
whose bodies differ and exits 1 if any do.

  scripts/compare_ptx.py BASE_TREE NEW_TREE [--jobs=2] [--keep=DIR]

For a change to host code, file layout or comments: identical device code
leaves only the host side to check on a GPU.
"""
import argparse
import collections
import concurrent.futures
import difflib
import pathlib
import re
import subprocess
import sys
import tempfile

NVCC = '/usr/local/cuda/bin/nvcc'
FLAGS = ['-ptx', '-O2', '-std=c++20', '-arch=sm_90a', '-DNDEBUG',
         '-DMOETUNE_CUDA_ARCHS_STR="90a"',
         '-DMOETUNE_CUDA_LIBRARY_DIR="/usr/local/cuda/lib"',
         '-isystem=/usr/local/cuda/include', '-x', 'cu']


def compile_tree(root, out, jobs):
    sources = sorted(p for p in root.glob('kernels/**/*.cu'))
    def one(src):
        ptx = out / (str(src.relative_to(root)).replace('/', '_') + '.ptx')
        done = subprocess.run([NVCC, *FLAGS, f'-I{root}', str(src), '-o',
                               str(ptx)], capture_output=True, text=True)
        return src, done.returncode, done.stderr
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        for src, code, err in pool.map(one, sources):
            if code != 0:
                sys.exit(f'{src}: nvcc failed\n{err}')


def neutral(text):
    text = re.sub(r'\$L__BB\d+_', '$L__BB_', text)
    text = re.sub(r'__local_depot\d+', '__local_depot', text)
    text = re.sub(r'\$str(\$\d+)?', '$str', text)
    return re.sub(r'_Z\w+', 'SYM', text)


def kernel_name(symbol):
    return re.sub(r'\d+_GLOBAL__N__[0-9a-f]+_\d+_\w+?_cu_[0-9a-f]+', '',
                  symbol)


def kernels(ptx_dir):
    found = collections.defaultdict(list)
    for ptx in ptx_dir.glob('*.ptx'):
        for part in re.split(r'\n(?=(?:\.visible |\.weak )?\.entry )',
                             ptx.read_text()):
            head = re.match(r'(?:\.visible |\.weak )?\.entry (\S+?)\(', part)
            if not head:
                continue
            body = '\n'.join(line for line in part.split('\n')
                             if line.strip() and not line.strip().startswith(
                                 ('.loc', '.file', '//')))
            found[kernel_name(head.group(1))].append(neutral(body))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('base', type=pathlib.Path)
    parser.add_argument('new', type=pathlib.Path)
    parser.add_argument('--jobs', type=int, default=2)
    parser.add_argument('--keep', type=pathlib.Path)
    args = parser.parse_args()
    work = args.keep or pathlib.Path(tempfile.mkdtemp(prefix='ptx-'))
    found = {}
    for side, root in (('base', args.base), ('new', args.new)):
        out = work / side
        out.mkdir(parents=True, exist_ok=True)
        compile_tree(root.resolve(), out, args.jobs)
        found[side] = kernels(out)
    base, new = found['base'], found['new']
    differ = 0
    for name in sorted(set(base) | set(new)):
        b = collections.Counter(base.get(name, []))
        n = collections.Counter(new.get(name, []))
        if b == n:
            continue
        differ += 1
        print(f'differs: {name} ({sum(b.values())} in base, '
              f'{sum(n.values())} in new)')
        only_b, only_n = list((b - n).elements()), list((n - b).elements())
        if only_b and only_n:
            diff = difflib.unified_diff(only_b[0].split('\n'),
                                        only_n[0].split('\n'), lineterm='', n=0)
            print('\n'.join(list(diff)[2:12]))
    kernels_b = sum(len(v) for v in base.values())
    kernels_n = sum(len(v) for v in new.values())
    print(f'{kernels_b} kernels in base, {kernels_n} in new, {differ} names '
          'differ')
    return 1 if differ else 0


if __name__ == '__main__':
    sys.exit(main())
