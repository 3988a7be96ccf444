"""The official `openai` Python client against the real `actorlm serve` process.

Usage: openai_client_test.py ACTORLM_BINARY [CONFIG]
Starts the server (default config: cpu backend, default model; or CONFIG, e.g. the cuda backend
with the default model in tools/gpu/check.sh and on tools/cuda_emu in CTest) on a free loopback port, then
runs chat and completion calls, streaming and not, and one refused call, through the client;
then vLLM's extension fields, sent as the ecosystem's clients send them (`extra_body`), each
streamed and not, with a check of its effect. GET /metrics is read with Prometheus's own
text-format parser (prometheus_client).
"""
import json
import re
import subprocess
import sys
import threading
import unittest
import urllib.request

import openai
from prometheus_client.parser import text_string_to_metric_families

MODEL = "SmolLM2-135M-Instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def logprob_delta():
    """How far two computations of one log-probability may lie apart: a prefill row and a decode
    step, or a prompt alone and in a batch, go through other kernels and GEMM shapes. 2e-3 with f32
    activations (the cpu backend; the cuda backend with model.weights = "f32"); 3e-2 where the cuda
    backend keeps them in bf16, 8 significant bits (2.7e-3 measured on tools/cuda_emu). A row off by
    one position is off by whole units."""
    if len(sys.argv) < 3:
        return 2e-3
    with open(sys.argv[2], "rb") as f:
        text = f.read()
    try:
        import tomllib  # Python 3.11
        config = tomllib.loads(text.decode())
        backend, weights = config.get("engine", {}).get("backend"), config.get("model", {}).get("weights")
    except ImportError:  # an older python3 (a GPU machine's own): the two keys by pattern
        value = lambda key: (re.search(rb'^\s*' + key + rb'\s*=\s*"([^"]*)"', text, re.M) or [None, b""])[1].decode()
        backend, weights = value(b"backend"), value(b"weights")
    return 3e-2 if backend == "cuda" and weights != "f32" else 2e-3


LOGPROB_DELTA = logprob_delta()


class Server:
    def __init__(self, binary):
        config = ["--config", sys.argv[2]] if len(sys.argv) > 2 else []
        self.proc = subprocess.Popen([binary, "serve", "--port", "0", *config], stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.log = []
        for line in self.proc.stdout:
            self.log.append(line)
            m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
            if m:
                self.url = m.group(1)
                break
        else:
            raise RuntimeError("the server did not start:\n" + "".join(self.log))
        threading.Thread(target=lambda: self.log.extend(self.proc.stdout), daemon=True).start()

    def stop(self):
        self.proc.terminate()
        code = self.proc.wait(timeout=30)
        if code != 0:
            raise RuntimeError(f"the server exited with {code}:\n" + "".join(self.log))


class ServerTestCase(unittest.TestCase):
    """A test class with its own server, and a client of it."""
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(sys.argv[1])
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key="unused", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()  # SIGTERM: drains and exits 0


class OpenAIClientTest(ServerTestCase):

    def test_chat_completion_answers_the_question(self):
        r = self.client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0)
        self.assertEqual(r.choices[0].message.content, "The capital of France is Paris.")
        self.assertEqual(r.choices[0].finish_reason, "stop")
        self.assertEqual(r.usage.prompt_tokens, 37)

    def test_chat_completion_streams_the_same_answer(self):
        stream = self.client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, stream=True,
                                                     stream_options={"include_usage": True})
        text, reasons, usage = "", [], None
        for chunk in stream:
            if chunk.usage is not None:
                usage = chunk.usage
            for c in chunk.choices:
                text += c.delta.content or ""
                if c.finish_reason:
                    reasons.append(c.finish_reason)
        self.assertEqual(text, "The capital of France is Paris.")
        self.assertEqual(reasons, ["stop"])
        self.assertIsNotNone(usage)
        self.assertEqual(usage.total_tokens, usage.prompt_tokens + usage.completion_tokens)

    def test_completion_continues_raw_text(self):
        r = self.client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=3, temperature=0)
        self.assertEqual(r.choices[0].text, " Paris.\n")
        self.assertEqual(r.choices[0].finish_reason, "length")

    def test_completion_streams_with_logprobs(self):
        stream = self.client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=3,
                                                temperature=0, stream=True, logprobs=1)
        text, tokens = "", []
        for chunk in stream:
            text += chunk.choices[0].text
            tokens += chunk.choices[0].logprobs.tokens
        self.assertEqual(text, " Paris.\n")
        self.assertEqual(len(tokens), 3)

    def test_seeded_sampling_reproduces(self):
        ask = lambda: self.client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=8,
                                                     temperature=1.0, seed=3).choices[0].text
        self.assertEqual(ask(), ask())

    def test_models_lists_the_served_model(self):
        self.assertEqual([m.id for m in self.client.models.list()], [MODEL])

    def test_bad_parameter_raises_bad_request_naming_it(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=5)
        self.assertEqual(e.exception.status_code, 400)
        self.assertIn("temperature: must be in [0, 2], found 5", str(e.exception))

    def test_metrics_parse_with_prometheus_own_parser(self):
        self.client.completions.create(model=MODEL, prompt="The capital of France is", max_tokens=4, temperature=0)
        with urllib.request.urlopen(self.server.url + "/metrics", timeout=30) as r:
            text = r.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        # The parser drops a counter's _total suffix from the family name.
        self.assertEqual(families["actorlm_engine_steps"].type, "counter")
        self.assertEqual(families["actorlm_time_to_first_token_seconds"].type, "histogram")
        value = {s.name: s.value for f in families.values() for s in f.samples}
        self.assertGreaterEqual(value["actorlm_engine_steps_total"], 4)
        self.assertGreater(value["actorlm_shard_step_seconds_total"], 0)
        self.assertGreaterEqual(value["actorlm_engine_step_seconds_total"], value["actorlm_shard_step_seconds_total"])
        self.assertGreaterEqual(value["actorlm_generation_tokens_total"], 4)

    def test_unknown_model_raises_not_found(self):
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="gpt-4o", messages=QUESTION)

    def test_a_repeated_prompt_reports_its_cached_tokens_in_the_clients_usage_model(self):
        # OpenAI's usage.prompt_tokens_details.cached_tokens, read through the client's own types.
        # Chat prompts share the template's system turn with every other chat test, so the first
        # call may already hit a block or two of it; the second hits every block of its own.
        messages = [{"role": "user", "content": "Name three rivers of Europe, each with the sea it flows into."}]
        first = self.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, temperature=0)
        second = self.client.chat.completions.create(model=MODEL, messages=messages, max_tokens=1, temperature=0)
        whole = (second.usage.prompt_tokens - 1) // 16 * 16  # every full block but the last token's
        self.assertEqual(first.usage.prompt_tokens_details.cached_tokens % 16, 0)
        self.assertLess(first.usage.prompt_tokens_details.cached_tokens, whole)
        self.assertEqual(second.usage.prompt_tokens_details.cached_tokens, whole)

    def test_the_clients_x_request_id_names_the_response(self):
        raw = self.client.completions.with_raw_response.create(
            model=MODEL, prompt=PROMPT, max_tokens=1, extra_headers={"X-Request-Id": "client-trace-1"})
        self.assertEqual(raw.headers["x-request-id"], "client-trace-1")
        self.assertEqual(raw.parse().id, "cmpl-client-trace-1")


PROMPT = "The capital of France is"  # greedy: " Paris.\n"


def gather(stream):
    """A stream's choices joined: {index: [text, finish_reason, tokens]}, and every chunk's usage."""
    choices, usages = {}, []
    for chunk in stream:
        usages.append(chunk.usage)
        for c in chunk.choices:
            got = choices.setdefault(c.index, ["", None, []])
            if hasattr(c, "delta"):
                got[0] += c.delta.content or ""
                if c.logprobs and c.logprobs.content:
                    got[2] += [t.token for t in c.logprobs.content]
            else:
                got[0] += c.text
                if c.logprobs:
                    got[2] += c.logprobs.tokens
            got[1] = c.finish_reason or got[1]
    return choices, usages


class VllmExtensionFieldsTest(ServerTestCase):
    """Each of vLLM's extension fields through the official client's extra_body, streamed and not."""

    def complete(self, stream, **kw):
        """(text, finish_reason, completion_tokens, logprob tokens) of a greedy completion of PROMPT."""
        args = dict(model=MODEL, prompt=PROMPT, temperature=0, max_tokens=3)
        args.update(kw)
        if not stream:
            r = self.client.completions.create(**args)
            c = r.choices[0]
            return c.text, c.finish_reason, r.usage.completion_tokens, c.logprobs.tokens if c.logprobs else []
        choices, usages = gather(self.client.completions.create(stream=True, stream_options={"include_usage": True}, **args))
        text, reason, tokens = choices[0]
        return text, reason, usages[-1].completion_tokens, tokens

    def chat(self, stream, **kw):
        """(content, finish_reason, usage) of a greedy answer to QUESTION (64 tokens at most: an
        answer that misses its end fails at once, not after the whole context)."""
        args = dict(model=MODEL, messages=QUESTION, temperature=0, max_tokens=64)
        args.update(kw)
        if not stream:
            r = self.client.chat.completions.create(**args)
            return r.choices[0].message.content, r.choices[0].finish_reason, r.usage
        choices, usages = gather(self.client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **args))
        return choices[0][0], choices[0][1], usages[-1]

    def token_ids(self):
        """The ids of the greedy completion's tokens (return_tokens_as_token_ids)."""
        _, _, _, tokens = self.complete(False, logprobs=0, extra_body={"return_tokens_as_token_ids": True})
        self.assertTrue(all(re.fullmatch(r"token_id:\d+", t) for t in tokens), tokens)
        return [int(t.split(":")[1]) for t in tokens]

    def test_ignore_eos_runs_to_max_tokens(self):
        for stream in (False, True):
            text, reason, usage = self.chat(stream, max_tokens=20, extra_body={"ignore_eos": True})
            self.assertEqual((reason, usage.completion_tokens), ("length", 20), f"stream={stream}")
            self.assertTrue(text.startswith("The capital of France is Paris."), text)
            _, reason, usage = self.chat(stream, max_tokens=20)
            self.assertEqual(reason, "stop")
            self.assertLess(usage.completion_tokens, 20)

    def test_min_tokens_suppresses_eos(self):
        _, _, plain = self.chat(False, max_tokens=40)
        for stream in (False, True):
            text, _, usage = self.chat(stream, max_tokens=40, extra_body={"min_tokens": plain.completion_tokens + 4})
            self.assertGreater(usage.completion_tokens, plain.completion_tokens + 4, f"stream={stream}")
            self.assertTrue(text.startswith("The capital of France is Paris."), text)

    def test_return_tokens_as_token_ids_names_tokens_by_id(self):
        ids = self.token_ids()
        self.assertEqual(len(ids), 3)
        for stream in (False, True):
            _, _, _, tokens = self.complete(stream, logprobs=1, extra_body={"return_tokens_as_token_ids": True})
            self.assertEqual(tokens, [f"token_id:{i}" for i in ids])
        r = self.client.chat.completions.create(model=MODEL, messages=QUESTION, temperature=0, max_tokens=2, logprobs=True,
                                                extra_body={"return_tokens_as_token_ids": True})
        self.assertTrue(all(t.token.startswith("token_id:") for t in r.choices[0].logprobs.content))

    def test_stop_token_ids_stop_and_include_stop_str_in_output_keeps_the_token(self):
        paris, dot, _ = self.token_ids()
        for stream in (False, True):
            self.assertEqual(self.complete(stream, max_tokens=8, extra_body={"stop_token_ids": [dot]})[:3], (" Paris", "stop", 2))
            kept = self.complete(stream, max_tokens=8, extra_body={"stop_token_ids": [dot], "include_stop_str_in_output": True})
            self.assertEqual(kept[:3], (" Paris.", "stop", 2))

    def test_include_stop_str_in_output_keeps_a_stop_string(self):
        for stream in (False, True):
            self.assertEqual(self.complete(stream, stop=["."])[:2], (" Paris", "stop"))
            self.assertEqual(self.complete(stream, stop=["."], extra_body={"include_stop_str_in_output": True})[:2],
                             (" Paris.", "stop"))

    def test_min_tokens_holds_stop_strings_back_too(self):
        for stream in (False, True):
            text, reason, tokens, _ = self.complete(stream, max_tokens=3, stop=["."], extra_body={"min_tokens": 2})
            self.assertEqual((text, reason, tokens), (" Paris.\n", "length", 3))  # "." came with token 2

    def test_echo_returns_the_prompt(self):
        for stream in (False, True):
            self.assertEqual(self.complete(stream, extra_body={"echo": True})[0], PROMPT + " Paris.\n")

    def test_echo_with_logprobs_scores_the_prompt_as_lm_eval_asks(self):
        # lm-evaluation-harness's loglikelihood request (its local-completions model): the context
        # and continuation as token ids, echo, logprobs=1, max_tokens=1, temperature 0. It sums
        # token_logprobs[ctxlen:-1] and calls the continuation greedy when each of those equals
        # max(top_logprobs[i].values()).
        request = urllib.request.Request(self.server.url + "/tokenize", data=json.dumps({"prompt": PROMPT}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as r:
            context = json.load(r)["tokens"]
        generated = self.client.completions.create(model=MODEL, prompt=[context], max_tokens=2, temperature=0, logprobs=1)
        continuation = [int(t.removeprefix("token_id:")) for t in self.client.completions.create(
            model=MODEL, prompt=[context], max_tokens=2, temperature=0, logprobs=0,
            extra_body={"return_tokens_as_token_ids": True}).choices[0].logprobs.tokens]
        ids = context + continuation  # " Paris", "."
        for stream in (False, True):
            args = dict(model=MODEL, prompt=[ids], echo=True, logprobs=1, max_tokens=1, temperature=0)
            if stream:
                tokens, token_logprobs, top_logprobs, text = [], [], [], ""
                for chunk in self.client.completions.create(stream=True, **args):
                    c = chunk.choices[0]
                    text += c.text
                    if c.logprobs:
                        tokens += c.logprobs.tokens
                        token_logprobs += c.logprobs.token_logprobs
                        top_logprobs += c.logprobs.top_logprobs
            else:
                c = self.client.completions.create(**args).choices[0]
                text, tokens = c.text, c.logprobs.tokens
                token_logprobs, top_logprobs = c.logprobs.token_logprobs, c.logprobs.top_logprobs
            self.assertEqual(len(tokens), len(ids) + 1)
            self.assertTrue(text.startswith(PROMPT + " Paris."), text)
            self.assertIsNone(token_logprobs[0])  # nothing before the first token
            self.assertIsNone(top_logprobs[0])
            self.assertTrue(all(lp <= 0 for lp in token_logprobs[1:]))
            ctxlen = len(context)
            scored = token_logprobs[ctxlen:-1]
            self.assertEqual(len(scored), 2)
            for lp, top in zip(scored, top_logprobs[ctxlen:-1]):
                self.assertEqual(lp, max(top.values()))  # the greedy continuation: lm-eval's is_greedy
            # The same numbers as when the tokens were generated (the last row of a prefill then, a
            # row inside one now).
            for got, want in zip(scored, generated.choices[0].logprobs.token_logprobs):
                self.assertAlmostEqual(got, want, delta=LOGPROB_DELTA)
        # Two prompts, two samples each: every choice starts with its own prompt's scores.
        r = self.client.completions.create(model=MODEL, prompt=[ids, context], n=2, echo=True, logprobs=0,
                                           max_tokens=1, temperature=0)
        self.assertEqual(len(r.choices), 4)
        for c in r.choices:
            prompt = ids if c.index < 2 else context
            self.assertEqual(len(c.logprobs.tokens), len(prompt) + 1)
            self.assertIsNone(c.logprobs.token_logprobs[0])
            self.assertEqual(c.logprobs.tokens[:len(prompt)], r.choices[c.index // 2 * 2].logprobs.tokens[:len(prompt)])
            self.assertEqual(c.logprobs.token_logprobs[1:len(prompt)],
                             r.choices[c.index // 2 * 2].logprobs.token_logprobs[1:len(prompt)])  # one copy
        # The shared context scored alike in both sequences (rows of one batch: rounding only).
        for a, b in zip(r.choices[0].logprobs.token_logprobs[1:len(context)], r.choices[2].logprobs.token_logprobs[1:]):
            self.assertAlmostEqual(a, b, delta=LOGPROB_DELTA)

    def test_prompt_logprobs_score_the_prompt_as_vllm_returns_them(self):
        # vLLM's extension: each choice's prompt_logprobs, null first, then per prompt token an object
        # of token ids to logprob, rank and decoded_token (the token itself and the k most likely).
        echo = self.client.completions.create(model=MODEL, prompt=PROMPT, echo=True, logprobs=1, max_tokens=1,
                                              temperature=0, extra_body={"return_tokens_as_token_ids": True})
        ids = [int(t.removeprefix("token_id:")) for t in echo.choices[0].logprobs.tokens][:-1]
        want = echo.choices[0].logprobs.token_logprobs[:-1]
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, n=2, max_tokens=1, temperature=0,
                                           extra_body={"prompt_logprobs": 2})
        self.assertEqual(r.usage.prompt_tokens, len(ids))
        for c in r.choices:
            scores = c.model_extra["prompt_logprobs"]
            self.assertEqual(scores, r.choices[0].model_extra["prompt_logprobs"])  # one prompt, one copy
            self.assertEqual(len(scores), len(ids))
            self.assertIsNone(scores[0])
            for i in range(1, len(ids)):
                entry = scores[i]
                own = entry[str(ids[i])]
                self.assertAlmostEqual(own["logprob"], want[i], delta=LOGPROB_DELTA)
                best = max(e["logprob"] for e in entry.values())
                self.assertEqual(own["rank"] == 1, own["logprob"] == best, entry)
                self.assertEqual(sorted(e["rank"] for e in entry.values())[:2], [1, 2], entry)  # the alternatives
                if len(entry) == 3:  # the token is not among them: two are more likely
                    self.assertGreaterEqual(own["rank"], 3, entry)
                self.assertTrue(all(isinstance(e["decoded_token"], str) for e in entry.values()))
        # Two prompts, n = 2 of best_of = 3: choices 0 and 1 carry the first prompt's scores, 2 and 3
        # the second's (as each prompt alone scores them; rows of one batch: rounding only).
        other = "Paris, the city of light, is the capital of"
        alone = {p: self.client.completions.create(model=MODEL, prompt=p, max_tokens=1, temperature=0,
                                                   extra_body={"prompt_logprobs": 1}).choices[0].model_extra["prompt_logprobs"]
                 for p in (PROMPT, other)}
        self.assertNotEqual(len(alone[PROMPT]), len(alone[other]))
        both = self.client.completions.create(model=MODEL, prompt=[PROMPT, other], n=2, max_tokens=2, seed=1,
                                              extra_body={"prompt_logprobs": 1, "best_of": 3})
        self.assertEqual(len(both.choices), 4)
        for c in both.choices:
            got, want = c.model_extra["prompt_logprobs"], alone[PROMPT if c.index < 2 else other]
            self.assertEqual(len(got), len(want))
            for g, w in zip(got[1:], want[1:]):
                self.assertEqual(g.keys(), w.keys())
                for key in g:
                    self.assertAlmostEqual(g[key]["logprob"], w[key]["logprob"], delta=LOGPROB_DELTA)
        # With echo's logprobs too: each takes its own number of alternatives.
        mixed = self.client.completions.create(model=MODEL, prompt=PROMPT, echo=True, logprobs=1, max_tokens=1,
                                               temperature=0, extra_body={"prompt_logprobs": 4}).choices[0]
        self.assertTrue(all(len(top) == 1 for top in mixed.logprobs.top_logprobs[1:len(ids)]))
        self.assertTrue(all(len(e) in (4, 5) for e in mixed.model_extra["prompt_logprobs"][1:]))
        # Chat: once for the response, over the rendered prompt.
        chat = self.client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": PROMPT}],
                                                   max_tokens=1, extra_body={"prompt_logprobs": 0})
        scores = chat.model_extra["prompt_logprobs"]
        self.assertEqual(len(scores), chat.usage.prompt_tokens)
        self.assertIsNone(scores[0])
        self.assertTrue(all(len(e) == 1 and list(e.values())[0]["rank"] >= 1 for e in scores[1:]))
        # Not when streaming (as vLLM): a 400 naming the field.
        with self.assertRaises(openai.BadRequestError) as refused:
            list(self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1, stream=True,
                                                extra_body={"prompt_logprobs": 1}))
        self.assertIn("prompt_logprobs", str(refused.exception))

    def test_truncate_prompt_tokens_keeps_the_end_of_the_prompt(self):
        k = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1).usage.prompt_tokens
        longer = "Forget all that.\n" + PROMPT
        for stream in (False, True):
            # The model reads PROMPT's tokens alone (hence its answer), and echo shows them.
            text = self.complete(stream, prompt=longer, extra_body={"truncate_prompt_tokens": k, "echo": True})[0]
            self.assertEqual(text, PROMPT + " Paris.\n")
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(False, extra_body={"truncate_prompt_tokens": 0})
        self.assertIn("truncate_prompt_tokens", str(e.exception))

    def test_logit_bias_of_minus_100_bans_a_token(self):
        paris = self.token_ids()[0]
        for stream in (False, True):
            # OpenAI's own logit_bias parameter, as vLLM takes it (the ids as strings).
            _, _, _, tokens = self.complete(stream, logprobs=0, logit_bias={str(paris): -100},
                                            extra_body={"return_tokens_as_token_ids": True})
            self.assertNotIn(f"token_id:{paris}", tokens)
            _, _, _, forced = self.complete(stream, logprobs=0, max_tokens=2, logit_bias={"42": 100},
                                            extra_body={"return_tokens_as_token_ids": True})
            self.assertEqual(forced, ["token_id:42", "token_id:42"])

    def test_the_early_stop_of_a_capped_workload_ends_a_request_at_its_length(self):
        # What `bench client` and the simulator send a request of a workload with max_tokens
        # (sim::early_stop_token): the stop token masked for length - 1 tokens, then forced.
        for length in (1, 5):
            for stream in (False, True):
                _, reason, tokens, _ = self.complete(stream, max_tokens=40, logit_bias={"0": 100},
                                                     extra_body={"min_tokens": length - 1, "stop_token_ids": [0]})
                self.assertEqual((reason, tokens), ("stop", length), f"length={length} stream={stream}")

    def test_continuous_usage_stats_puts_usage_in_every_chunk(self):
        options = {"include_usage": True, "continuous_usage_stats": True}
        for create, args in ((self.client.completions.create, dict(prompt=PROMPT, max_tokens=5)),
                             (self.client.chat.completions.create, dict(messages=QUESTION, max_tokens=5))):
            stream = create(model=MODEL, temperature=0, stream=True, extra_body={"stream_options": options}, **args)
            choices, usages = gather(stream)
            self.assertTrue(all(u is not None for u in usages), usages)
            counts = [u.completion_tokens for u in usages]
            self.assertEqual(counts, sorted(counts))
            self.assertEqual(counts[-1], 5)
            self.assertTrue(all(u.total_tokens == u.prompt_tokens + u.completion_tokens for u in usages))

    def test_skip_special_tokens_false_shows_the_end_of_turn(self):
        for stream in (False, True):
            shown, _, _ = self.chat(stream, max_tokens=12, extra_body={"ignore_eos": True, "skip_special_tokens": False})
            self.assertIn("Paris.<|im_end|>", shown)
            hidden, _, _ = self.chat(stream, max_tokens=12, extra_body={"ignore_eos": True})
            self.assertNotIn("<|im_end|>", hidden)
            # vLLM's detokenizer for byte-level vocabularies writes no spaces around special tokens either way.
            same, _, _ = self.chat(stream, max_tokens=12, extra_body={"ignore_eos": True, "skip_special_tokens": False,
                                                                      "spaces_between_special_tokens": False})
            self.assertEqual(same, shown)

    def test_eos_text_is_kept_only_with_include_stop_str_in_output(self):
        for stream in (False, True):
            text, reason, _ = self.chat(stream, extra_body={"skip_special_tokens": False})
            self.assertEqual((text, reason), ("The capital of France is Paris.", "stop"))
            kept, _, _ = self.chat(stream, extra_body={"skip_special_tokens": False, "include_stop_str_in_output": True})
            self.assertEqual(kept, "The capital of France is Paris.<|im_end|>")

    def test_repetition_penalty_changes_a_repeating_continuation(self):
        prompt = "1, 2, 3, 1, 2, 3, 1, 2, 3, 1, 2,"
        for stream in (False, True):
            plain = self.complete(stream, prompt=prompt, max_tokens=8)[0]
            penalised = self.complete(stream, prompt=prompt, max_tokens=8, extra_body={"repetition_penalty": 1.8})[0]
            self.assertNotEqual(plain, penalised)
            self.assertEqual(self.complete(stream, prompt=prompt, max_tokens=8, extra_body={"repetition_penalty": 1.0})[0], plain)

    def test_add_special_tokens_adds_nothing_for_smollm2(self):
        # SmolLM2's tokenizer adds no BOS (as HF's): the prompt is the same either way.
        for stream in (False, True):
            _, _, with_special = self.chat(stream, max_tokens=1, extra_body={"add_special_tokens": True})
            self.assertEqual(with_special.prompt_tokens, 37)
        r = self.client.completions.create(model=MODEL, prompt=PROMPT, max_tokens=1, extra_body={"add_special_tokens": False})
        self.assertEqual(r.usage.prompt_tokens, 5)

    def test_chat_template_switches_continue_the_final_message(self):
        prefill = QUESTION + [{"role": "assistant", "content": "The capital of France is"}]
        for stream in (False, True):
            _, _, closed = self.chat(stream, max_tokens=1, extra_body={"add_generation_prompt": False})
            self.assertEqual(closed.prompt_tokens, 37 - 4)  # no "<|im_start|>assistant\n": 4 tokens
            text, _, _ = self.chat(stream, messages=prefill, max_tokens=2,
                                   extra_body={"add_generation_prompt": False, "continue_final_message": True})
            self.assertEqual(text, " Paris.")
            kwargs, _, _ = self.chat(stream, messages=prefill, max_tokens=2,
                                     extra_body={"chat_template_kwargs": {"add_generation_prompt": False,
                                                                          "continue_final_message": True}})
            self.assertEqual(kwargs, " Paris.")
        with self.assertRaises(openai.BadRequestError) as e:
            self.chat(False, messages=prefill, extra_body={"continue_final_message": True})
        self.assertIn("continue_final_message", str(e.exception))

    def test_best_of_returns_the_samples_of_highest_cumulative_logprob(self):
        args = dict(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=1.0, seed=5, logprobs=0)
        every = self.client.completions.create(n=4, **args)
        ranked = sorted(every.choices, key=lambda c: -sum(c.logprobs.token_logprobs))
        best = self.client.completions.create(n=2, extra_body={"best_of": 4}, **args)
        self.assertEqual([c.text for c in best.choices], [c.text for c in ranked[:2]])
        self.assertEqual([c.index for c in best.choices], [0, 1])
        self.assertEqual(best.usage.completion_tokens, sum(len(c.logprobs.tokens) for c in ranked[:2]))
        with self.assertRaises(openai.BadRequestError) as e:
            self.client.completions.create(n=1, stream=True, extra_body={"best_of": 2}, **args)
        self.assertIn("best_of", str(e.exception))

    def test_model_may_be_omitted(self):
        r = self.client.completions.create(model=openai.NOT_GIVEN, prompt=PROMPT, max_tokens=3, temperature=0)
        self.assertEqual(r.choices[0].text, " Paris.\n")

    def test_unknown_fields_are_still_refused_by_name(self):
        with self.assertRaises(openai.BadRequestError) as e:
            self.complete(False, extra_body={"ignore_eoss": True})
        self.assertIn("ignore_eoss: unknown or unsupported field", str(e.exception))


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
