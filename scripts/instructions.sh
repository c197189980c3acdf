#!/usr/bin/env bash
# Instructions per `pre-tool` dispatch, counted by valgrind's callgrind: a figure the machine's
# noise cannot blur (criterion's times on a shared 2-core VM drift by a third from one hour to
# the next), for choosing between two builds of a change to the dispatch path. It is not a
# speed: a syscall or a cache miss costs far more than its instructions. The speeds are the
# benches' (README.md, Benchmarks).
#
# usage: scripts/instructions.sh BENCH_BINARY FILTER
#   BENCH_BINARY  a built bench of host/benches whose calls are `Session::pre_tool` (dispatch,
#                 instances): `cargo bench -p palisade --bench dispatch --no-run` prints its path
#   FILTER        the bench to run, e.g. `warm/minimal` (criterion's filter)
# e.g., a build before and after a change, each copied out of target/ first:
#   scripts/instructions.sh /tmp/dispatch-before warm/minimal
#   scripts/instructions.sh /tmp/dispatch-after warm/minimal
#
# The bench runs under callgrind for 2 s of its own time (`--profile-time 2`), counting only
# inside `pre_tool` (setup, such as compiling the components, is not counted but is slow under
# valgrind: a minute or two).
set -euo pipefail
if [ $# -ne 2 ]; then
    sed -n '8,11p' "$0" >&2
    exit 2
fi
bench=$1 filter=$2
if ! command -v valgrind >/dev/null; then
    echo "error: valgrind is not installed (Debian/Ubuntu: apt-get install valgrind)" >&2
    exit 1
fi
out=$(mktemp)
trap 'rm -f "$out"' EXIT
valgrind --tool=callgrind --callgrind-out-file="$out" --collect-atstart=no \
    "--toggle-collect=palisade::points::pre_tool::*" \
    "--toggle-collect=<palisade::session::Session>::pre_tool::*" \
    "$bench" --bench "$filter" --profile-time 2 >/dev/null 2>&1 || {
    echo "error: $bench --bench '$filter' failed under valgrind" >&2
    exit 1
}
python3 - "$out" "$filter" <<'PY'
import re, sys

# callgrind's format: `fn=(id) name` starts a function's records, `cfn=(id) name` names the
# callee of the next `calls=N ...` line; names are given once, then referred to by id.
names, function, callee = {}, None, None
calls = total = 0
# Legacy symbol names (`pre_tool::{{closure}}`, rustc ≤ 1.96's default) and v0 ones
# (`<…Session>::pre_tool::{closure#0}`, rustc 1.97's).
inside = lambda name: name is not None and (
    "pre_tool::{{closure}}" in name
    or name.startswith("<palisade::session::Session>::pre_tool::{closure#"))
for line in open(sys.argv[1]):
    m = re.match(r"^(c?fn)=\((\d+)\)(?: (.*))?$", line.rstrip("\n"))
    if m:
        kind, id_, name = m.groups()
        if name:
            names[id_] = name
        if kind == "fn":
            function = names.get(id_)
        else:
            callee = names.get(id_)
        continue
    m = re.match(r"^calls=(\d+)", line)
    if m:
        # A poll of `pre_tool`'s future from outside it: one dispatch, as a call made directly
        # (the benches' warm and fresh calls) completes at its first poll; a call that runs on
        # a fiber and yields would count once per poll.
        if inside(callee) and not inside(function):
            calls += int(m.group(1))
        callee = None
        continue
    m = re.match(r"^(?:summary|totals): (\d+)", line)
    if m:
        total = int(m.group(1))
if calls == 0:
    sys.exit("error: no `pre_tool` call was counted (is this a bench of host/benches?)")
print(f"{sys.argv[2]}: {total / calls:,.0f} instructions per pre-tool dispatch "
      f"({calls} dispatches)")
PY
