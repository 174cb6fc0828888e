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


def varint(buf, i):
    value, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def fields(buf):
    """(field number, value) of a serialized message, one level deep."""
    i = 0
    while i < len(buf):
        key, i = varint(buf, i)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            value, i = varint(buf, i)
        elif wire_type == 2:
            n, i = varint(buf, i)
            value, i = buf[i:i + n], i + n
        elif wire_type == 5:
            value, i = buf[i:i + 4], i + 4
        elif wire_type == 1:
            value, i = buf[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wire_type}")
        yield number, value


def reflect_files(grpc, channel, symbol):
    """The FileDescriptorProtos server reflection gives for `symbol`."""
    from google.protobuf import descriptor_pb2
    name = symbol.encode()
    request = b"\x22" + bytes([len(name)]) + name  # file_containing_symbol
    call = channel.stream_stream(
        "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
        request_serializer=lambda b: b, response_deserializer=lambda b: b)
    files = []
    for response in call(iter([request]), timeout=30):
        for number, value in fields(response):
            if number == 4:  # file_descriptor_response
                for inner, proto in fields(value):
                    if inner == 1:
                        f = descriptor_pb2.FileDescriptorProto()
                        f.ParseFromString(proto)
                        files.append(f)
            elif number == 7:  # error_response
                fail(f"reflection of {symbol}: {list(fields(value))}")
    return files


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
        # Server reflection describes the health service (gRPC's built-in
        # one has no descriptor): the ServerReflectionRequest is
        # written by hand (field 4, file_containing_symbol) and the answer
        # read field by field, so no reflection stubs are needed.
        for symbol, service in (("grpc.health.v1.Health", "Health"),
                                ("tributary.v1.Tributary", "Tributary")):
            files = reflect_files(grpc, channel, symbol)
            check(files, f"reflection has no file for {symbol}")
            services = {sv.name: [m.name for m in sv.method]
                        for f in files for sv in f.service}
            check(service in services,
                  f"reflection describes {sorted(services)}, not {symbol}")
        check({"Check", "Watch"} <= set(
            m.name for f in reflect_files(grpc, channel, "grpc.health.v1.Health")
            for sv in f.service for m in sv.method), "Health's methods")
    finally:
        try:
            code = server_process.stop(proc)
        except server_process.ServerError as e:
            fail(str(e))
    check(code == 0, f"the server exited with {code} after SIGTERM")
    print("python_client_test: all checks passed")


if __name__ == "__main__":
    main()
