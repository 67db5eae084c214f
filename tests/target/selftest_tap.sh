#!/bin/sh
# SPDX-License-Identifier: MIT
# `npuctl selftest --tap`: the console without its stamps is TAP that a TAP consumer reads
# as it is (Perl's TAP::Parser, which prove uses): a plan, every test passed, no parse
# errors; the machine's expected refusals (stderr) stay out of the stream.
#   selftest_tap.sh NPUCTL
set -eu
npuctl=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$npuctl" selftest --mesh 2x2 --tap >"$tmp/out.tap" 2>"$tmp/err.log" ||
    { cat "$tmp/out.tap" "$tmp/err.log" | tail -n 20; echo "FAIL: selftest"; exit 1; }
perl -MTAP::Parser -e '
    my $p = TAP::Parser->new({ source => $ARGV[0] });
    while (defined(my $r = $p->next)) { }
    my @e = $p->parse_errors;
    printf "TAP: %d tests, %d passed, plan %s\n", $p->tests_run, scalar($p->passed),
        $p->plan;
    exit(@e || $p->has_problems || !$p->is_good_plan || $p->tests_run < 10 ? 1 : 0);
' "$tmp/out.tap" || { head -n 5 "$tmp/out.tap"; echo "FAIL: not TAP a parser accepts"; exit 1; }
grep -q '^# expected below: the machine logs' "$tmp/out.tap" ||
    { echo "FAIL: no note before the expected refusals"; exit 1; }
echo "PASS: selftest --tap is TAP"
