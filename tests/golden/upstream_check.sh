#!/usr/bin/env bash
# Judge Tenso packets with the REAL upstream package (tenso 0.24.0), for CTest:
#
#   upstream_check.sh DIR          our packets (<case>.tenso, written by GoldenTest with
#                                  TENSO_GOLDEN_OUT=DIR): every file in DIR must pass
#   upstream_check.sh --self-test  the golden files in tests/vectors: every case must pass
#
# Creates the upstream virtualenv first (tests/upstream/venv.sh: PyPI on first use, a no-op
# afterwards; TENSO_UPSTREAM_VENV and PYTHON are honoured). Never skips: when the venv cannot
# be created this fails and says so, so CI shows it.
set -uo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
me="upstream_check.sh"

die() { printf '%s: %s\n' "$me" "$*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: $me DIR | --self-test"
if [[ "$1" == "--self-test" ]]; then
    target=(--self-test)
    dir="$repo/tests/vectors"
else
    dir="$1"
    target=("$dir")
    [[ -d "$dir" ]] || die "$dir does not exist: GoldenTest did not write our packets (CTest fixture golden.write_ours)"
fi
shopt -s nullglob
files=("$dir"/*.tenso)
(( ${#files[@]} > 0 )) || die "no .tenso files in $dir"

if ! venv_out="$(bash "$repo/tests/upstream/venv.sh")"; then
    die "FAILED to create the upstream virtualenv with tests/upstream/venv.sh (it needs PyPI the first time; see its messages above). The upstream checks cannot run without it."
fi
py="$(printf '%s\n' "$venv_out" | tail -n1)"
[[ -x "$py" ]] || die "tests/upstream/venv.sh printed '$py', which is not an executable python"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
"$py" "$repo/tests/upstream/decode_ours.py" "${target[@]}" | tee "$log"
rc=${PIPESTATUS[0]}

summary="$(tail -n1 "$log")"
if [[ ! "$summary" =~ ^([0-9]+)\ passed,\ ([0-9]+)\ failed(,\ ([0-9]+)\ skipped)?$ ]]; then
    die "decode_ours.py exited with $rc without its summary line (last line: '$summary')"
fi
passed=${BASH_REMATCH[1]}
failed=${BASH_REMATCH[2]}
(( rc == 0 && failed == 0 )) || die "upstream rejects $failed packet(s) (exit status $rc): see the FAIL lines above"
# Every file must have been judged: a file whose name is no manifest case would be ignored.
(( passed == ${#files[@]} )) || die "$passed packets passed but $dir holds ${#files[@]} .tenso files"
printf '%s: upstream tenso accepts all %d packets in %s\n' "$me" "$passed" "$dir"
