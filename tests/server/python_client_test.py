#!/usr/bin/python3
"""Drives tributary-server with an independent client: Python grpcio with
message classes generated from proto/ by protoc at test time (no code of
ours on the client side). Exit 0 when every check passes.

  python_client_test.py --server BIN --proto-dir DIR [--model DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile

import server_process  # next to this file


def fail(message):
    print(f"python_client_test: FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--server", required=True)
    parser.add_argument("--proto-dir", required=True)
    parser.add_argument("--model", default="")
    args = parser.parse_args()
    try:
        import grpc  # Debian's python3-grpcio
    except ImportError:
        fail("python3 cannot import grpc: install python3-grpcio "
             "(scripts/install-deps.sh does)")

    out = tempfile.mkdtemp(prefix="tributary-pystubs-")
    subprocess.run(["protoc", f"--proto_path={args.proto_dir}",
                    f"--python_out={out}", "tributary/v1/tributary.proto",
                    "grpc/health/v1/health.proto"], check=True)
    sys.path.insert(0, out)
    from tributary.v1 import tributary_pb2 as pb  # noqa: E402
    # Loaded by path: the generated package "grpc.health.v1" would clash
    # with the grpc module itself.
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "health_pb2", os.path.join(out, "grpc", "health", "v1", "health_pb2.py"))
    health_pb2 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(health_pb2)

    try:
        proc, ports = server_process.start(
            args.server, args.model, ["api", "health"],
            ["--port", "0", "--health-port", "0", "--metrics-port", "-1",
             "--http-port", "-1"])
    except server_process.ServerError as e:
        fail(str(e))
    ports = {"API": ports["api"], "health": ports["health"]}
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{ports['API']}")
        grpc.channel_ready_future(channel).result(timeout=30)

        def unary(method, request, response_class, metadata=None):
            call = channel.unary_unary(
                f"/tributary.v1.Tributary/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response_class.FromString)
            return call.with_call(request, timeout=60, metadata=metadata)

        info, _ = unary("GetModelInfo", pb.GetModelInfoRequest(), pb.ModelInfo)
        check(info.num_layers == len(info.layer_types) and info.num_layers > 0,
              f"GetModelInfo: {info}")
        check(info.vocab_size > 0 and info.context_tokens > 0, "model info")

        tok, _ = unary("Tokenize", pb.TokenizeRequest(text="ROMEO: hello",
                                                      return_pieces=True),
                       pb.TokenizeResponse)
        check(len(tok.token_ids) > 0 and len(tok.pieces) == len(tok.token_ids),
              "Tokenize")

        request = pb.GenerateRequest(text="ROMEO:\nBut soft")
        request.sampling.temperature = 0.8
        request.sampling.seed = 7
        request.stopping.max_new_tokens = 24
        request.stopping.ignore_eos = True
        request.response.return_token_ids = True
        unary_response, call = unary("Generate", request, pb.GenerateResponse,
                                     metadata=[("x-request-id", "py-1")])
        check(("x-request-id", "py-1") in call.initial_metadata(),
              f"request id not echoed: {call.initial_metadata()}")
        check(len(unary_response.token_ids) == 24, "24 tokens")
        check(unary_response.finish_reason == pb.FINISH_REASON_LENGTH,
              "finish reason")
        check(unary_response.usage.generated_tokens == 24, "usage")

        stream = channel.unary_stream(
            "/tributary.v1.Tributary/GenerateStream",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=pb.GenerateResponse.FromString)
        text, ids, last = "", [], None
        for message in stream(request, timeout=60):
            text += message.text
            ids += list(message.token_ids)
            last = message
        check(text == unary_response.text,
              f"streamed text {text!r} != unary {unary_response.text!r}")
        check(ids == list(unary_response.token_ids), "streamed ids")
        check(last.finish_reason == pb.FINISH_REASON_LENGTH, "stream finish")

        bad = pb.GenerateRequest(text="x")
        bad.sampling.top_p = 1.5
        try:
            unary("Generate", bad, pb.GenerateResponse)
            fail("top_p = 1.5 was accepted")
        except grpc.RpcError as e:
            check(e.code() == grpc.StatusCode.INVALID_ARGUMENT, str(e.code()))
            check("top_p" in e.details(), e.details())

        health_channel = grpc.insecure_channel(
            f"127.0.0.1:{ports['health']}")
        check_call = health_channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        status = check_call(health_pb2.HealthCheckRequest(service=""),
                            timeout=10)
        check(status.status == health_pb2.HealthCheckResponse.SERVING,
              f"health {status.status}")
    finally:
        try:
            code = server_process.stop(proc)
        except server_process.ServerError as e:
            fail(str(e))
    check(code == 0, f"the server exited with {code} after SIGTERM")
    print("python_client_test: all checks passed")


if __name__ == "__main__":
    main()
