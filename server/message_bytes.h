// Messages to and from the bytes of a call, for the methods registered as
// raw callback methods (TributaryService, ReflectionService): they parse
// their requests themselves because gRPC's callback API answers a request
// that does not parse with UNIMPLEMENTED and an empty message, before any
// handler runs, so the call is neither logged nor counted. Parsing here
// makes it INVALID_ARGUMENT with the reason, after the token check, in the
// handler, which logs and counts it as it does every other error.
#ifndef TRIBUTARY_SERVER_MESSAGE_BYTES_H_
#define TRIBUTARY_SERVER_MESSAGE_BYTES_H_

#include "google/protobuf/message.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/status.h"

namespace tributary {

// Parses a request. INVALID_ARGUMENT when the bytes are not a valid
// `message`: "the request is not a valid <type>: <reason>", the reason
// naming the field where it can (a string that is not UTF-8, as proto3
// requires, or a message that does not parse), else saying the bytes are
// not protobuf or end early. Does not consume `bytes` (its slices are
// shared, not copied). Costs one parse; a failure costs a second look.
grpc::Status ParseRequest(const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* message);

// Serializes a response into `bytes` (replacing what it held). INTERNAL only
// for a message protobuf cannot serialize (2 GiB or more).
grpc::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* bytes);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_MESSAGE_BYTES_H_
