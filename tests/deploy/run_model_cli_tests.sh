#!/usr/bin/env bash
# End-to-end tests of `etch model` and of --model NAME in `etch run` / `etch llm`: install,
# list, verify, rollback, remove; the fallback chain current -> previous -> the embedded
# model with its reason on stderr; bad names and lying files.
#
#   run_model_cli_tests.sh ETCH FIXTURES_DIR REPO_DIR EMBEDDED(ON|OFF)
set -u

. "$(dirname "${BASH_SOURCE[0]}")/../harness/cli_lib.sh"
ETCH=$(abspath "${1:?usage: run_model_cli_tests.sh ETCH FIXTURES_DIR REPO_DIR EMBEDDED}")
FIX=$(abspath "${2:?missing FIXTURES_DIR}")
REPO=$(abspath "${3:?missing REPO_DIR}")
EMBEDDED=${4:?missing EMBEDDED}
[ -x "$ETCH" ] || cli_abort "not an executable: $ETCH"
[ -f "$FIX/pte/add.pte" ] || cli_abort "no fixtures in $FIX"
cli_begin etch_model_cli
unset ETCH_STORE XDG_DATA_HOME
export HOME=$WORK/home # the default store lands here, never in the real home
S=$WORK/store
ADD=$FIX/pte/add.pte
SEG=$FIX/pte/add_constant_segment.pte
LM=$REPO/models/default/model.pte
TOK=$REPO/models/default/tokenizer.model
GEN=(--prompt "Once upon a time" --max-new-tokens 8 --temperature 0)

# ---- usage ----
expect 2 "$ETCH" model;                                  has_err 'missing subcommand'
expect 2 "$ETCH" model frob;                             has_err "unknown subcommand 'frob'"
expect 0 "$ETCH" help model;                             has_out 'etch model install NAME FILE'
expect 0 "$ETCH" --help;                                 has_out 'model +the on-device model store'
expect 2 "$ETCH" model install add;                      has_err 'install takes NAME FILE'
for bad in ../x a/b .hidden -x "" "a b" "$(printf 'a\tb')" \
           xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; do
    expect 2 "$ETCH" model install "$bad" "$ADD" --store "$S"
done
has_err 'invalid model name'
expect 2 "$ETCH" model install add "$ADD" --version ../1 --store "$S"; has_err 'invalid version'
expect 2 "$ETCH" model list extra --store "$S";          has_err 'list takes no arguments'
expect 2 "$ETCH" model verify add --sha256 00 --store "$S"
[ ! -e "$WORK/x" ] && pass || fail "something was written outside the store"

# ---- install, list, verify ----
expect 0 "$ETCH" model install add "$ADD" --store "$S";  has_out '^installed add 1 in .*728 bytes'
sha=$(sha256sum "$SEG" | cut -d' ' -f1)
expect 1 "$ETCH" model install add "$SEG" --sha256 "$(echo "$sha" | tr 0-9a-f 1-9a-f0)" \
    --store "$S"
has_err 'Integrity: .*expected'
expect 0 "$ETCH" model install add "$SEG" --sha256 "$sha" --store "$S"
has_out "installed add 2 .*sha256 $sha.*previous version 1 kept"
expect 1 "$ETCH" model install add "$SEG" --version 2 --store "$S"; has_err 'already installed'
expect 0 "$ETCH" model list --store "$S"
has_out '^add +2 +1 +2 +1156'
expect 0 "$ETCH" model verify add --full --store "$S"
has_out '^add 2 \(current\): ok \(full check\)'; has_out '^add 1 \(previous\): ok'
expect 1 "$ETCH" model verify nope --store "$S";         has_err 'not installed'
# the default store: $HOME/.local/share/etch/models, or $XDG_DATA_HOME, or $ETCH_STORE
expect 0 "$ETCH" model install add "$ADD"
[ -f "$HOME/.local/share/etch/models/add/versions/1/model.pte" ] && pass || fail "HOME store"
XDG_DATA_HOME=$WORK/xdg expect 0 "$ETCH" model install add "$ADD"
[ -f "$WORK/xdg/etch/models/add/versions/1/model.pte" ] && pass || fail "XDG store"
ETCH_STORE=$S expect 0 "$ETCH" model list;              has_out "store $S: 1 model"

# ---- refused at install: not a program; an operator this build lacks ----
expect 1 "$ETCH" model install junk "$FIX/pte/not_a_program.pte" --store "$S"
has_err 'NotAProgram: store: junk: not installed: model.pte'
cp "$ADD" "$WORK/adX.pte" && chmod u+w "$WORK/adX.pte"
off=$(grep -abo 'aten::add' "$WORK/adX.pte" | head -1 | cut -d: -f1)
printf 'X' | dd of="$WORK/adX.pte" bs=1 seek=$((off + 8)) conv=notrunc status=none
expect 1 "$ETCH" model install adx "$WORK/adX.pte" \
    --sha256 "$(sha256sum "$WORK/adX.pte" | cut -d' ' -f1)" --store "$S"
has_err "OperatorMissing: .*operator 'aten::adX.out'"
expect 0 "$ETCH" model list --store "$S";                has_out '^store .*: 1 model$'

# ---- etch run --model NAME: the current version, then the previous one ----
expect 0 "$ETCH" run --model add --store "$S" --print-output
has_out "from $S/add/versions/2/model.pte"; has_out 'output 0: Tensor Float \[3\] = \[2, 2, 2\]'
# the check registers the kernels the run asked for (the registry is process-wide)
expect 0 "$ETCH" run --model add --store "$S" --kernels portable; has_out 'kernels portable'
expect 0 "$ETCH" run --model add --store "$S" --no-backends
expect 0 "$ETCH" llm --model "$LM" --tokenizer "$TOK" "${GEN[@]}" --kernels portable --quiet
expect 0 "$ETCH" run --model "$ADD" --print-output;      has_out "from $ADD"
expect 0 "$ETCH" run "$ADD";                             has_out "from $ADD"
expect 2 "$ETCH" run "$ADD" --model add;                 has_err 'not both'
expect 1 "$ETCH" run --model nope --store "$S";          has_err "'nope' is neither a file nor a model"
expect 1 "$ETCH" run --model /nonexistent.pte;           has_err 'AccessFailed'
chmod u+w "$S/add/versions/2/model.pte"
truncate -s 100 "$S/add/versions/2/model.pte"
expect 0 "$ETCH" run --model add --store "$S" --print-output
has_err 'model: add: size-mismatch: current 2 \(size-mismatch\).*served previous version 1'
has_out "from $S/add/versions/1/model.pte"
expect 1 "$ETCH" model verify add --store "$S"
has_out '^add 2 \(current\): FAILED: size-mismatch'; has_out '^add 1 \(previous\): ok'
expect 0 "$ETCH" model rollback add --store "$S";        has_out 'version 1 is current now'
expect 0 "$ETCH" model verify add --store "$S";          has_out '^add 1 \(current\): ok'
expect 0 "$ETCH" model remove add --version 2 --store "$S"; has_out 'removed add 2'
expect 1 "$ETCH" model rollback add --store "$S";        has_err 'no previous version'
# a foreign file inside a name is not deleted
echo mine > "$S/add/notes.txt"
expect 1 "$ETCH" model remove add --store "$S";          has_err "holds 'notes.txt'"
rm "$S/add/notes.txt"
expect 0 "$ETCH" model remove add --store "$S";          has_out 'removed add \(every version\)'
expect 0 "$ETCH" model list --store "$S";                has_out ': 0 models'

# ---- etch llm: paths as before; the store's default; the embedded model ----
expect 0 "$ETCH" llm --model "$LM" --tokenizer "$TOK" "${GEN[@]}" --quiet
has_out '^Once upon a time'
want=$(cat "$OUT")
if [ "$EMBEDDED" = ON ]; then
    expect 0 "$ETCH" llm --store "$WORK/none" "${GEN[@]}"
    has_err "model: default: not-installed: no model store at $WORK/none \(.*\); served the embedded default \(models/default\)"
    [ "$(cat "$OUT")" = "$want" ] && pass || fail "the embedded model's text differs"
fi
expect 0 "$ETCH" model install default "$LM" --tokenizer "$TOK" --store "$S"
has_out 'installed default 1 .*tokenizer 15239 bytes'
expect 0 "$ETCH" model install default "$LM" --tokenizer "$TOK" --store "$S"
expect 0 "$ETCH" llm --store "$S" "${GEN[@]}";           has_err "model: served default 2, the current version, from $S"
[ "$(cat "$OUT")" = "$want" ] && pass || fail "the stored model's text differs"
expect 0 "$ETCH" llm --model default --store "$S" "${GEN[@]}" --quiet
[ "$(cat "$OUT")" = "$want" ] && pass || fail "--model default"
expect 0 "$ETCH" llm --store "$S" "${GEN[@]}" --kernels portable --quiet
[ "$(cat "$OUT")" = "$want" ] && pass || fail "default, portable kernels"
# corrupt the head of the current version: the previous one, with the reason
chmod u+w "$S/default/versions/2/model.pte"
printf 'Z' | dd of="$S/default/versions/2/model.pte" bs=1 seek=100 conv=notrunc status=none
expect 0 "$ETCH" llm --store "$S" "${GEN[@]}"
has_err 'model: default: hash-mismatch: current 2 \(hash-mismatch\).*served previous version 1'
[ "$(cat "$OUT")" = "$want" ] && pass || fail "served previous: text differs"
# a lying manifest on the previous one too (its size): the embedded model, or a clear failure
sed -i 's/^\(file pte model.pte\) \([0-9]*\)/\1 1\2/' "$S/default/versions/1/manifest"
if [ "$EMBEDDED" = ON ]; then
    expect 0 "$ETCH" llm --store "$S" "${GEN[@]}"
    has_err 'previous 1 \(bad-manifest\).*checksum.*served the embedded default'
    [ "$(cat "$OUT")" = "$want" ] && pass || fail "served embedded: text differs"
else
    expect 1 "$ETCH" llm --store "$S" "${GEN[@]}"
fi
# an explicit name never falls back to the embedded model
expect 1 "$ETCH" llm --model default --store "$S" "${GEN[@]}"; has_err 'nothing passed its check'
expect 1 "$ETCH" model verify default --full --store "$S"
has_out 'default 2 \(current\): FAILED: hash-mismatch'; has_out 'default 1 \(previous\): FAILED: bad-manifest'
# a stored model without a tokenizer needs --tokenizer
expect 0 "$ETCH" model install lm "$LM" --store "$S"
expect 1 "$ETCH" llm --model lm --store "$S" "${GEN[@]}"; has_err 'has no tokenizer: give --tokenizer'
expect 0 "$ETCH" llm --model lm --tokenizer "$TOK" --store "$S" "${GEN[@]}" --quiet
[ "$(cat "$OUT")" = "$want" ] && pass || fail "--model lm --tokenizer"
expect 2 "$ETCH" llm --model "$LM" "${GEN[@]}";          has_err 'missing --tokenizer'

cli_end
