#!/usr/bin/env bash
# rnnbench's CI recipe as plain commands (docs/ci.md): the pull request's pytest-benchmark rows (each
# judges its returned gradients against the oracle) measured against the base commit's on this machine,
# in alternating rounds, then `rnnbench compare --format github`: a job summary and a pull-request comment
# body. GitHub Actions runs it from docs/ci/github-workflow.yml; any other CI runs it as it is, from the
# repository root, with the variables below (all optional).
#
#   RNNBENCH_CI_PYTHON     the interpreter of rnnbench's environment (default .venv/bin/python)
#   RNNBENCH_CI_OUT        where every file goes (default results/ci)
#   RNNBENCH_CI_BASE       the base commit (default: the pull_request event's base.sha from
#                          $GITHUB_EVENT_PATH, else origin/$GITHUB_BASE_REF)
#   RNNBENCH_CI_BASELINE   a folder of the base commit's benchmark JSON (base-*.json), e.g. a CI cache: used
#                          where it holds some, else filled by measuring the base here (a cached baseline
#                          ran on another machine: compared with --across-machines --normalize)
#   RNNBENCH_CI_TESTS      the pytest selection of benchmark rows (default tests/test_benchmarks.py::test_fwd_bwd)
#   RNNBENCH_CI_SELECT     a pytest -k expression over those rows (default: every row)
#   RNNBENCH_CI_PYTEST_ARGS  more pytest options for every session (e.g. "--benchmark-timer=time.process_time":
#                          CPU time, which other work on a shared runner moves far less, for one-thread torch rows)
#   RNNBENCH_CI_ROUNDS     runs per side, alternating base new new base ... (default 2)
#   RNNBENCH_CI_PROFILE    1 (default): each row profiled after its timing, so a slower row says where its
#                          time went; 0: no profiles
#   RNNBENCH_CI_COMPARE_ARGS  more `rnnbench compare` options (e.g. "--threshold 20%")
#   GITHUB_STEP_SUMMARY    where set, the summary is appended to it
#
# Writes $OUT/summary.md (the job summary) and $OUT/comment.md (the comment body: its first line is a
# marker a workflow finds its earlier comment by), the benchmark JSON of each run and its pytest log.
# Exit: 0 nothing wrong; 1 a wrong gradient (a benchmark row's check failed) or a row decided slower;
# 2 bad input; 3 measured nothing (no row ran, or every row noisy, one-sided or not run).
set -uo pipefail

PY=${RNNBENCH_CI_PYTHON:-.venv/bin/python}
OUT=${RNNBENCH_CI_OUT:-results/ci}
TESTS=${RNNBENCH_CI_TESTS:-tests/test_benchmarks.py::test_fwd_bwd}
SELECT=${RNNBENCH_CI_SELECT:-}
ROUNDS=${RNNBENCH_CI_ROUNDS:-2}
PROFILE=${RNNBENCH_CI_PROFILE:-1}
BASELINE=${RNNBENCH_CI_BASELINE:-}
ROOT=$(pwd)
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
PY=$(command -v "$PY" || echo "$PY")
[ -x "$PY" ] || { echo "rnnbench-ci: no interpreter at $PY (set RNNBENCH_CI_PYTHON)" >&2; exit 2; }
case $PY in /*) ;; *) PY=$ROOT/$PY ;; esac

# The base commit: the event's (the pull request's base when it was opened or last pushed), else the branch.
BASE=${RNNBENCH_CI_BASE:-}
if [ -z "$BASE" ] && [ -n "${GITHUB_EVENT_PATH:-}" ] && [ -f "$GITHUB_EVENT_PATH" ]; then
    BASE=$("$PY" -c 'import json, sys; print(((json.load(open(sys.argv[1])).get("pull_request") or {}).get("base") or {}).get("sha") or "")' "$GITHUB_EVENT_PATH")
fi
if [ -z "$BASE" ] && [ -n "${GITHUB_BASE_REF:-}" ]; then
    BASE=origin/$GITHUB_BASE_REF
fi

# One timed pytest-benchmark session of the tree at $1, its JSON to $2, its log to $3; returns pytest's code.
# The tree's own rnnbench is imported (its src first on PYTHONPATH); a session that benchmarked nothing
# (every row skipped or deselected: pytest-benchmark then writes no file) leaves an empty document.
measure() {
    local tree=$1 json=$2 log=$3 code=0
    # never on pytest-xdist workers (pytest-benchmark times nothing there); a wide terminal keeps each
    # failure's first line whole in the short summary (the row and its gradient status)
    local args=("$TESTS" --benchmark-enable "--benchmark-json=$json" -p no:cacheprovider -p no:xdist -rfE)
    [ -n "$SELECT" ] && args+=(-k "$SELECT")
    # shellcheck disable=SC2206  # the extra options are words, as a user writes them
    args+=(${RNNBENCH_CI_PYTEST_ARGS:-})
    (cd "$tree" && COLUMNS=400 RNNBENCH_BENCH_PROFILE=$PROFILE PYTHONPATH="$tree/src${PYTHONPATH:+:$PYTHONPATH}" \
        "$PY" -m pytest "${args[@]}") >"$log" 2>&1 || code=$?
    if [ ! -s "$json" ]; then
        printf '{"benchmarks": [], "datetime": "%s"}\n' "$(date -u +%Y-%m-%dT%H:%M:%S.%N)" >"$json"
    fi
    return $code
}

new_codes=()
base_files=()
new_files=()
cached=0
if [ -n "$BASELINE" ] && compgen -G "$BASELINE/base-*.json" >/dev/null; then
    cached=1
    base_files=("$BASELINE"/base-*.json)
elif [ -z "$BASE" ]; then
    echo "rnnbench-ci: no base commit: set RNNBENCH_CI_BASE, or run on a pull_request event" >&2
    exit 2
else
    git worktree remove --force "$OUT/base-tree" >/dev/null 2>&1 || true
    if ! git worktree add --detach "$OUT/base-tree" "$BASE" >"$OUT/base-checkout.log" 2>&1; then
        echo "rnnbench-ci: cannot check out the base commit $BASE: $(tail -n 1 "$OUT/base-checkout.log")" >&2
        exit 2
    fi
fi

# Alternating rounds (base new, new base, ...): a load that drifts weighs both sides alike.
for round in $(seq 1 "$ROUNDS"); do
    order="base new"
    [ $((round % 2)) -eq 0 ] && order="new base"
    for side in $order; do
        if [ "$side" = base ]; then
            [ "$cached" = 1 ] && continue
            measure "$OUT/base-tree" "$OUT/base-$round.json" "$OUT/base-$round.log" || true
            base_files+=("$OUT/base-$round.json")
        else
            code=0
            measure "$ROOT" "$OUT/new-$round.json" "$OUT/new-$round.log" || code=$?
            new_codes+=("$code")
            new_files+=("$OUT/new-$round.json")
        fi
    done
done
if [ "$cached" = 0 ]; then
    git worktree remove --force "$OUT/base-tree" >/dev/null 2>&1 || true
    if [ -n "$BASELINE" ]; then  # keep the base's runs for the next pull request on this base (a cache)
        mkdir -p "$BASELINE" && cp "${base_files[@]}" "$BASELINE"/
    fi
fi

# The gradient checks: a benchmark row of the new side whose check failed, in any round.
failed=$(cat "$OUT"/new-*.log | grep -E '^(FAILED|ERROR) ' | sort -u)
wrong=0
bad_input=0
for code in "${new_codes[@]}"; do
    case $code in
        0 | 5) ;;           # passed; no test collected (measured nothing: compare says so)
        4) bad_input=1 ;;   # pytest's usage error (a bad -k expression, a test path that is not there)
        *) wrong=1 ;;       # a failed row (its gradient check), or pytest itself failed
    esac
done

joined() { local IFS=,; echo "$*"; }
compare_args=(--format github)
[ "$cached" = 1 ] && compare_args+=(--across-machines --normalize)
# shellcheck disable=SC2206  # the extra options are words, as a user writes them
compare_args+=(${RNNBENCH_CI_COMPARE_ARGS:-})
gate=0
PYTHONPATH="$ROOT/src${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m rnnbench compare "$(joined "${base_files[@]}")" "$(joined "${new_files[@]}")" "${compare_args[@]}" \
    >"$OUT/compare.md" 2>"$OUT/compare.err" || gate=$?

if [ "$wrong" = 1 ] || [ "$gate" = 1 ]; then
    code=1
elif [ "$bad_input" = 1 ] || [ "$gate" = 2 ]; then
    code=2
else
    code=$gate  # 0, or 3: measured nothing
fi
case $code in
    0) verdict="OK: no wrong gradient, nothing decided slower" ;;
    1) verdict="FAIL: a wrong gradient or a row decided slower" ;;
    2) verdict="BAD INPUT: see the error below" ;;
    3) verdict="MEASURED NOTHING: no row could be judged (not a pass)" ;;
    *) verdict="rnnbench compare exited $code" ;;
esac

{
    echo "<!-- rnnbench compare -->"
    echo "## rnnbench: $verdict (exit $code)"
    echo
    echo "Base \`${BASE:-cached baseline}\`, ${#new_files[@]} run(s) of the pull request and ${#base_files[@]} of the base$([ "$cached" = 1 ] && echo " (cached)")."
    echo
    if [ -n "$failed" ]; then
        echo "#### Gradient checks that failed (pytest)"
        echo
        echo '```'
        echo "$failed"
        echo '```'
        echo
    fi
    if [ -s "$OUT/compare.err" ]; then
        echo '```'
        head -n 20 "$OUT/compare.err"
        echo '```'
        echo
    fi
    grep -v '^<!-- rnnbench compare -->$' "$OUT/compare.md"
} >"$OUT/comment.md"
{
    cat "$OUT/comment.md"
    echo
    echo "Files: \`$OUT\` (the benchmark JSON and pytest log of every run)."
    echo
} >"$OUT/summary.md"
if [ -n "${GITHUB_STEP_SUMMARY:-}" ]; then
    cat "$OUT/summary.md" >>"$GITHUB_STEP_SUMMARY"
fi
echo "rnnbench-ci: $verdict (exit $code); summary $OUT/summary.md, comment $OUT/comment.md" >&2
exit "$code"
