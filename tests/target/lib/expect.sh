# SPDX-License-Identifier: MIT
# Sourced by the refusal tests (image_refusals.sh, serve_refusals.sh): `expect WANT RE CMD...`
# runs CMD, requires exit status WANT and a line matching the extended regex RE in its output
# (kept in $tmp/out.txt), and prints that line; otherwise names the script and $case, shows
# the output and exits 1.
expect() {
    want=$1 re=$2
    shift 2
    set +e
    "$@" > "$tmp/out.txt" 2>&1
    got=$?
    set -e
    if [ "$got" -ne "$want" ] || ! grep -Eq -- "$re" "$tmp/out.txt"; then
        echo "$(basename "$0" .sh) $case: wanted exit $want and /$re/, got exit $got:" >&2
        cat "$tmp/out.txt" >&2
        exit 1
    fi
    grep -E -- "$re" "$tmp/out.txt" | head -1
}
