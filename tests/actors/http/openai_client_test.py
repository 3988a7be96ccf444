"""The official `openai` Python client against the real `actorlm serve` process.

Usage: openai_client_test.py ACTORLM_BINARY
Starts the server (default config: cpu backend, default model) on a free loopback port, then
runs chat and completion calls, streaming and not, and one refused call, through the client.
"""
import re
import subprocess
import sys
import threading
import unittest

import openai

MODEL = "SmolLM2-135M-Instruct"
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class Server:
    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "serve", "--port", "0"], stdout=subprocess.PIPE,
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


class OpenAIClientTest(unittest.TestCase):
    server = None

    @classmethod
    def setUpClass(cls):
        cls.server = Server(sys.argv[1])
        cls.client = openai.OpenAI(base_url=cls.server.url + "/v1", api_key="unused", max_retries=0)

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()  # SIGTERM: drains and exits 0

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

    def test_unknown_model_raises_not_found(self):
        with self.assertRaises(openai.NotFoundError):
            self.client.chat.completions.create(model="gpt-4o", messages=QUESTION)


if __name__ == "__main__":
    unittest.main(argv=sys.argv[:1], verbosity=2)
