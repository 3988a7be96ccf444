#!/usr/bin/env python3
"""Rewrites a .cu file as host C++ for tools/cuda_emu, keeping its lines where they were.

  cu_to_cpp.py IN.cu OUT.cpp

Two constructs of CUDA C++ are not C++, and they are all it rewrites:
  kernel<<<grid, block[, smem[, stream]]>>>(args);
      -> ::cuda_emu::launch("kernel", kernel, ::cuda_emu::LaunchArgs(grid, block, ...), args);
  __shared__ T name[N]...;        -> auto& name = ::cuda_emu::shared_static<T[N]...>(__PRETTY_FUNCTION__, KEY);
  extern __shared__ T name[];     -> T* name = ::cuda_emu::shared_dynamic<T>();
The function's name (each template instantiation its own) and KEY (the declaration's line and
column) name the memory, so every thread of a block finds the same. The device qualifiers
(__global__, __device__ ...) stay: the CUDA headers make them attributes that the host compiler
ignores. A __shared__ it does not rewrite (several declarators, an initialiser, alignas, one in
a header) fails to compile (device.hpp defines __shared__ as an undeclared name), and a static
one is refused here: neither becomes a per-thread variable silently. A kernel named with a
template argument list ending in >>> before <<<, or a launch in a comment, is not handled.
"""
import re
import sys

DYNAMIC = re.compile(r"extern\s+__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*\[\s*\]\s*;")
STATIC = re.compile(r"__shared__\s+([\w:<>, ]+?)\s+(\w+)\s*((?:\[[^\]]+\])*)\s*;")


def rewrite_shared(text):
    static = re.search(r"\bstatic\s+__shared__\b", text)
    if static:
        line = text.count("\n", 0, static.start()) + 1
        raise SystemExit(f"cu_to_cpp: a static __shared__ at line {line} is not emulated")
    text = DYNAMIC.sub(lambda m: f"{m[1]}* {m[2]} = ::cuda_emu::shared_dynamic<{m[1]}>();", text)

    def declaration(m):
        line = text.count("\n", 0, m.start()) + 1
        column = m.start() - (text.rfind("\n", 0, m.start()) + 1)
        return f"auto& {m[2]} = ::cuda_emu::shared_static<{m[1]}{m[3]}>(__PRETTY_FUNCTION__, {line * 1000 + column});"

    return STATIC.sub(declaration, text)


def kernel_start(text, end):
    """The start of the expression that ends at `end` (exclusive) and names the kernel: names,
    ::, and balanced <...> and (...), with no space outside brackets."""
    i = end
    depth = 0
    while i > 0:
        c = text[i - 1]
        if c in ">)":
            depth += 1
        elif c in "<(":
            if depth == 0:
                break
            depth -= 1
        elif depth == 0 and not (c.isalnum() or c in "_:"):
            break
        i -= 1
    return i


def matching_paren(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise SystemExit(f"cu_to_cpp: unbalanced parentheses after offset {open_at}")


def rewrite_launches(text):
    out = []
    pos = 0
    while True:
        lt = text.find("<<<", pos)
        if lt < 0:
            out.append(text[pos:])
            return "".join(out)
        gt = text.find(">>>", lt)
        if gt < 0:
            raise SystemExit("cu_to_cpp: <<< without >>>")
        name_end = lt
        while name_end > 0 and text[name_end - 1].isspace():
            name_end -= 1
        start = kernel_start(text, name_end)
        kernel = text[start:name_end]
        if not kernel:
            raise SystemExit(f"cu_to_cpp: no kernel before <<< at line {text.count(chr(10), 0, lt) + 1}")
        config = text[lt + 3:gt]
        paren = gt + 3
        while text[paren].isspace():
            paren += 1
        if text[paren] != "(":
            raise SystemExit(f"cu_to_cpp: no arguments after >>> at line {text.count(chr(10), 0, gt) + 1}")
        close = matching_paren(text, paren)
        args = text[paren + 1:close]
        spacing = text[name_end:lt]  # keeps the line breaks
        name = " ".join(kernel.split()).replace('"', "'")
        call = f'::cuda_emu::launch("{name}", {kernel},{spacing}::cuda_emu::LaunchArgs({config})'
        call += (", " + args if args.strip() else "") + ")"
        out.append(text[pos:start])
        out.append(call)
        pos = close + 1


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    src, dst = sys.argv[1], sys.argv[2]
    with open(src, encoding="utf-8") as f:
        text = f.read()
    body = rewrite_launches(rewrite_shared(text))
    with open(dst, "w", encoding="utf-8") as f:
        f.write(f'#line 1 "{src}"\n' + body)


if __name__ == "__main__":
    main()
