#!/usr/bin/env bash
# EleutherAI's lm-evaluation-harness (a client nobody on the team wrote; tools/setup_lm_eval.sh
# installs it in .venv/lmeval) runs a multiple-choice task against the real `actorlm serve` (cpu
# backend, default model) through its `local-completions` model, as people evaluate a served
# model: every choice is a loglikelihood request (token ids, echo, logprobs 1, max_tokens 1), four
# prompts to a request (lm-eval puts its target_delimiter, a space, between question and choice).
# The task is local (a JSON file made here; nothing is fetched). Then reads
# its per-sample log:
#   every choice of every question scored, each a finite log-probability below 0;
#   "The capital of France is" + " Paris" (the model's own greedy continuation) is greedy by
#   lm-eval's test (each token's logprob is the top one), " London" is not, and " Paris" scores
#   higher; its score equals what the server reports for " Paris" when it generates it.
# Usage: lm_eval_test.sh ACTORLM VENV TOKENIZER_DIR. Exit 77 (skipped) without VENV.
set -euo pipefail
actorlm="$1" venv="$2" tokenizer="$3"
source "$(dirname "$0")/serve_for_test.sh"
skip_without "$venv/bin/lm_eval" "lm-evaluation-harness" tools/setup_lm_eval.sh
start_server "$actorlm"

mkdir -p "$work/tasks"
cat > "$work/tasks/capitals.jsonl" <<'JSONL'
{"question": "The capital of France is", "choices": ["Paris", "London", "Rome"], "answer": 0}
{"question": "The capital of Italy is", "choices": ["Madrid", "Rome", "Berlin"], "answer": 1}
{"question": "The capital of Germany is", "choices": ["Berlin", "Vienna", "Paris"], "answer": 0}
{"question": "The capital of Spain is", "choices": ["Lisbon", "Madrid", "Rome"], "answer": 1}
{"question": "The capital of Japan is", "choices": ["Beijing", "Seoul", "Tokyo"], "answer": 2}
JSONL
cat > "$work/tasks/capitals.yaml" <<YAML
task: actorlm_capitals
dataset_path: json
dataset_kwargs:
  data_files:
    test: $work/tasks/capitals.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{question}}"
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
YAML

# Local files only: the task's data and the tokenizer folder.
export HF_DATASETS_OFFLINE=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
timeout --kill-after=10 300 "$venv/bin/lm_eval" --model local-completions \
  --model_args "model=SmolLM2-135M-Instruct,base_url=$url/v1/completions,tokenizer=$tokenizer,tokenized_requests=True,num_concurrent=2,max_retries=1" \
  --batch_size 4 --tasks actorlm_capitals --include_path "$work/tasks" --output_path "$work/out" --log_samples \
  > "$work/lm_eval.log" 2>&1 || { rc=$?; tail -n 40 "$work/lm_eval.log" >&2; fail "lm_eval exited $rc"; }

"$venv/bin/python" - "$work" "$url" <<'PY' || fail "see above"
import glob, json, math, sys, urllib.request
work, url = sys.argv[1], sys.argv[2]
ok = True
def check(cond, what):
    global ok
    if not cond:
        print("FAIL:", what, file=sys.stderr)
        ok = False
results = json.load(open(glob.glob(f"{work}/out/**/results_*.json", recursive=True)[0]))["results"]["actorlm_capitals"]
samples = [json.loads(line) for line in open(glob.glob(f"{work}/out/**/samples_actorlm_capitals_*.jsonl", recursive=True)[0])]
print("lm-eval:", {k: v for k, v in results.items() if k.startswith("acc")}, f"over {len(samples)} questions")
check(len(samples) == 5, f"{len(samples)} samples")
for s in samples:
    scores = [r[0] for r in s["resps"]]  # per choice: [loglikelihood, is_greedy]
    check(len(scores) == len(s["doc"]["choices"]), f"{s['doc']['question']}: {len(scores)} scores")
    for (ll, greedy) in scores:
        check(math.isfinite(float(ll)) and float(ll) < 0, f"{s['doc']['question']}: loglikelihood {ll}")
france = next(s for s in samples if "France" in s["doc"]["question"])
# The log keeps each response as written: numbers and booleans may come back as strings.
(paris, paris_greedy), (london, london_greedy) = france["resps"][0][0], france["resps"][1][0]
paris_greedy, london_greedy = str(paris_greedy) == "True", str(london_greedy) == "True"
print(f'"The capital of France is": " Paris" {paris} (greedy {paris_greedy}), " London" {london} (greedy {london_greedy})')
check(paris_greedy and not london_greedy, "greediness")
check(float(paris) > float(london), "Paris does not outscore London")
# " Paris" as the server scores it when it generates it.
body = json.dumps({"model": "SmolLM2-135M-Instruct", "prompt": "The capital of France is", "max_tokens": 1,
                   "temperature": 0, "logprobs": 1}).encode()
request = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
generated = json.load(urllib.request.urlopen(request, timeout=60))["choices"][0]["logprobs"]
check(generated["tokens"] == [" Paris"], f"generated {generated['tokens']}")
check(abs(generated["token_logprobs"][0] - float(paris)) < 2e-3,
      f'" Paris" scored {paris}, generated with {generated["token_logprobs"][0]}')
sys.exit(0 if ok else 1)
PY
echo "lm-eval: ok"
