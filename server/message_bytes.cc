#include "server/message_bytes.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/stubs/common.h"
#include "google/protobuf/unknown_field_set.h"
#include "grpcpp/impl/codegen/proto_utils.h"
#include "grpcpp/support/proto_buffer_reader.h"

namespace tributary {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::UnknownField;
using google::protobuf::UnknownFieldSet;

// Protobuf's own parse limit: deeper messages fail to parse anyway.
constexpr int kMaxDepth = 100;

std::string Flatten(const grpc::ByteBuffer& bytes) {
  std::vector<grpc::Slice> slices;
  std::string flat;
  if (!bytes.Dump(&slices).ok()) return flat;
  for (const grpc::Slice& s : slices) {
    flat.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return flat;
}

// Bytes that are well-formed wire format yet do not parse as `type` break
// one of the parser's checks beyond the wire format: a proto3 string that
// is not UTF-8, or a message field whose bytes do not parse (the same,
// further down). Returns the first such field's path
// ("chat.messages[1].content") and what is wrong with it, "" if none.
// `fields` are the message's fields read without its schema.
std::string FindBadField(const UnknownFieldSet& fields, const Descriptor& type,
                         const std::string& prefix, int depth) {
  if (depth > kMaxDepth) return "";
  std::map<int, int> occurrences;  // field number -> index of the next one
  for (int i = 0; i < fields.field_count(); ++i) {
    const UnknownField& field = fields.field(i);
    const FieldDescriptor* f = type.FindFieldByNumber(field.number());
    // Another wire type for a known field is kept as an unknown field by
    // the parser, not refused.
    if (f == nullptr || field.type() != UnknownField::TYPE_LENGTH_DELIMITED) {
      continue;
    }
    const int index = occurrences[field.number()]++;
    std::string path = prefix + f->name();
    if (f->is_repeated()) absl::StrAppend(&path, "[", index, "]");
    const std::string& value = field.length_delimited();
    if (f->type() == FieldDescriptor::TYPE_STRING &&
        f->file()->syntax() == FileDescriptor::SYNTAX_PROTO3 &&
        !google::protobuf::internal::IsStructurallyValidUTF8(value)) {
      return path + " is not valid UTF-8 (a string field must be)";
    }
    if (f->type() == FieldDescriptor::TYPE_MESSAGE) {
      UnknownFieldSet inner;
      if (!inner.ParseFromString(value)) {
        return absl::StrCat(path, " is not a valid ",
                            f->message_type()->full_name(),
                            " (not protobuf, or it ends early)");
      }
      std::string bad =
          FindBadField(inner, *f->message_type(), path + ".", depth + 1);
      if (!bad.empty()) return bad;
    }
  }
  return "";
}

}  // namespace

grpc::Status ParseRequest(const grpc::ByteBuffer& bytes,
                          google::protobuf::Message* message) {
  {
    // The reader consumes its buffer: a copy, which shares the slices.
    grpc::ByteBuffer shared(bytes);
    grpc::ProtoBufferReader reader(&shared);
    if (reader.status().ok() && message->ParseFromZeroCopyStream(&reader)) {
      return grpc::Status::OK;
    }
  }
  message->Clear();
  // Only a request that failed pays for the diagnosis.
  const std::string flat = Flatten(bytes);
  UnknownFieldSet fields;
  std::string reason;
  if (!fields.ParseFromString(flat)) {
    reason = "the bytes are not protobuf, or they end early";
  } else {
    reason = FindBadField(fields, *message->GetDescriptor(), "", 0);
    if (reason.empty()) reason = "the bytes do not parse as one";
  }
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                      absl::StrCat("the request is not a valid ",
                                   message->GetDescriptor()->full_name(), " (",
                                   flat.size(), " bytes): ", reason));
}

grpc::Status SerializeResponse(const google::protobuf::Message& message,
                               grpc::ByteBuffer* bytes) {
  // gRPC's serializer writes into an empty buffer only.
  bytes->Clear();
  bool own_buffer = false;
  return grpc::SerializationTraits<google::protobuf::Message>::Serialize(
      message, bytes, &own_buffer);
}

}  // namespace tributary
