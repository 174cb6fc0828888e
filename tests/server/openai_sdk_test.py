"""Drives tributary-server's OpenAI-compatible HTTP API with the official
`openai` Python SDK (pinned in requirements-openai.txt, run from the venv
the openai_sdk_venv fixture makes): models, completions and chat, streaming
and not (the streamed text equals the non-streamed one), and error cases.
Exit 0 when every check passes.

  openai_sdk_test.py --server BIN [--model DIR]
"""
import argparse
import sys

import openai

import server_process  # next to this file


def fail(message):
    print(f"openai_sdk_test: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--model", default="")
    args = parser.parse_args()
    try:
        proc, ports = server_process.start(
            args.server, args.model, ["http"],
            ["--port", "0", "--health-port", "-1", "--metrics-port", "-1",
             "--http-port", "0"])
    except server_process.ServerError as e:
        fail(str(e))
    port = ports["http"]
    try:
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1",
                               api_key="unused", max_retries=0, timeout=60)
        models = client.models.list()
        names = [m.id for m in models.data]
        check(len(names) == 1, f"one model expected, got {names}")
        model = names[0]

        # Completions, then the same seeded request streamed.
        params = dict(model=model, prompt="ROMEO:", max_tokens=16,
                      temperature=0.8, seed=11, extra_body={"ignore_eos": True})
        c = client.completions.create(**params)
        text = c.choices[0].text
        check(text, "empty completion")
        check(c.choices[0].finish_reason == "length",
              f"finish_reason {c.choices[0].finish_reason}")
        check(c.usage.completion_tokens == 16, f"usage {c.usage}")
        streamed = ""
        usage = None
        for chunk in client.completions.create(
                stream=True, stream_options={"include_usage": True}, **params):
            if chunk.choices:
                streamed += chunk.choices[0].text
            if chunk.usage:
                usage = chunk.usage
        check(streamed == text, f"streamed {streamed!r} != {text!r}")
        check(usage is not None and usage.completion_tokens == 16,
              f"stream usage {usage}")

        # Chat, thinking off (the answer is content), streamed and not.
        chat = dict(model=model, max_tokens=12, temperature=0.7, seed=5,
                    messages=[{"role": "system", "content": "Speak plainly."},
                              {"role": "user", "content": "Who goes there?"}],
                    extra_body={"chat_template_kwargs":
                                {"enable_thinking": False}})
        r = client.chat.completions.create(**chat)
        content = r.choices[0].message.content
        check(r.choices[0].message.role == "assistant", "role")
        check(content, "empty chat answer")
        streamed = ""
        for chunk in client.chat.completions.create(stream=True, **chat):
            if chunk.choices and chunk.choices[0].delta.content:
                streamed += chunk.choices[0].delta.content
        check(streamed == content, f"chat streamed {streamed!r} != {content!r}")

        # Errors: the SDK's exception classes from the HTTP status codes.
        try:
            client.completions.create(model=model, prompt="a", n=2)
            fail("n=2 was accepted")
        except openai.BadRequestError as e:
            check(e.status_code == 400, f"status {e.status_code}")
            check(e.body.get("param") == "n", f"body {e.body}")
        try:
            client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": "x"}],
                temperature=7000)
            fail("temperature 7000 was accepted")
        except openai.BadRequestError as e:
            check(e.body.get("param") == "temperature", f"body {e.body}")
        try:
            client.completions.create(model="no-such-model", prompt="a")
            fail("an unknown model was accepted")
        except openai.NotFoundError as e:
            check(e.status_code == 404, f"status {e.status_code}")
        # Still serving.
        c = client.completions.create(model=model, prompt="KING:", max_tokens=2)
        check(c.choices[0].text is not None, "no answer after the errors")
    finally:
        try:
            code = server_process.stop(proc)
        except server_process.ServerError as e:
            fail(str(e))
    check(code == 0, f"the server exited {code}")
    print("openai_sdk_test: all checks passed")


if __name__ == "__main__":
    main()
