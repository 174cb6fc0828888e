#include "server/reflection_service.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "server/message_bytes.h"

namespace tributary {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using grpc::reflection::v1alpha::FileDescriptorResponse;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;

// `file` first, then what it imports, depth first; each file once.
void AddFileAndImports(const FileDescriptor& file, std::set<std::string>* added,
                       FileDescriptorResponse* out) {
  if (!added->insert(file.name()).second) return;
  google::protobuf::FileDescriptorProto proto;
  file.CopyTo(&proto);
  out->add_file_descriptor_proto(proto.SerializeAsString());
  for (int i = 0; i < file.dependency_count(); ++i) {
    AddFileAndImports(*file.dependency(i), added, out);
  }
}

void SetError(grpc::StatusCode code, std::string message,
              ServerReflectionResponse* response) {
  response->mutable_error_response()->set_error_code(static_cast<int>(code));
  response->mutable_error_response()->set_error_message(std::move(message));
}

}  // namespace

// One ServerReflectionInfo call: read a request, write its answer, read the
// next, until the client half-closes. One operation is in flight at a
// time, so the reactions never run concurrently.
class ReflectionService::Reactor final
    : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  Reactor(const ReflectionService& service, grpc::CallbackServerContext* call)
      : service_(service) {
    if (grpc::Status auth = service.service_.CheckAuth(*call); !auth.ok()) {
      Finish(auth);
      return;
    }
    StartRead(&request_bytes_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the client half-closed, or the call ended
      Finish(grpc::Status::OK);
      return;
    }
    ServerReflectionRequest request;
    grpc::Status s = ParseRequest(request_bytes_, &request);
    if (s.ok())
      s = SerializeResponse(service_.Answer(request), &response_bytes_);
    if (!s.ok()) {
      Finish(s);
      return;
    }
    StartWrite(&response_bytes_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {  // the call ended: no one reads the status
      Finish(grpc::Status::CANCELLED);
      return;
    }
    StartRead(&request_bytes_);
  }

  void OnDone() override { delete this; }

 private:
  const ReflectionService& service_;
  grpc::ByteBuffer request_bytes_;
  grpc::ByteBuffer response_bytes_;
};

ReflectionService::ReflectionService(const ServiceContext& service,
                                     std::vector<std::string> service_names)
    : service_(service), service_names_(std::move(service_names)) {}

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
ReflectionService::ServerReflectionInfo(grpc::CallbackServerContext* call) {
  return new Reactor(*this, call);
}

ServerReflectionResponse ReflectionService::Answer(
    const ServerReflectionRequest& request) const {
  ServerReflectionResponse response;
  response.set_valid_host(request.host());
  *response.mutable_original_request() = request;
  const DescriptorPool& pool = *DescriptorPool::generated_pool();
  const FileDescriptor* file = nullptr;
  switch (request.message_request_case()) {
    case ServerReflectionRequest::kFileByFilename:
      file = pool.FindFileByName(request.file_by_filename());
      if (file == nullptr) {
        SetError(
            grpc::StatusCode::NOT_FOUND,
            absl::StrCat("no file named \"", request.file_by_filename(), "\""),
            &response);
      }
      break;
    case ServerReflectionRequest::kFileContainingSymbol:
      file = pool.FindFileContainingSymbol(request.file_containing_symbol());
      if (file == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("no symbol named \"",
                              request.file_containing_symbol(), "\""),
                 &response);
      }
      break;
    case ServerReflectionRequest::kFileContainingExtension: {
      const auto& ext = request.file_containing_extension();
      const Descriptor* type =
          pool.FindMessageTypeByName(ext.containing_type());
      const FieldDescriptor* field =
          type == nullptr
              ? nullptr
              : pool.FindExtensionByNumber(type, ext.extension_number());
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("no message type named \"", ext.containing_type(),
                              "\""),
                 &response);
      } else if (field == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat(ext.containing_type(), " has no extension ",
                              ext.extension_number()),
                 &response);
      } else {
        file = field->file();
      }
      break;
    }
    case ServerReflectionRequest::kAllExtensionNumbersOfType: {
      const std::string& name = request.all_extension_numbers_of_type();
      const Descriptor* type = pool.FindMessageTypeByName(name);
      if (type == nullptr) {
        SetError(grpc::StatusCode::NOT_FOUND,
                 absl::StrCat("no message type named \"", name, "\""),
                 &response);
        break;
      }
      std::vector<const FieldDescriptor*> extensions;
      pool.FindAllExtensions(type, &extensions);
      auto* numbers = response.mutable_all_extension_numbers_response();
      numbers->set_base_type_name(name);
      for (const FieldDescriptor* e : extensions) {
        numbers->add_extension_number(e->number());
      }
      break;
    }
    case ServerReflectionRequest::kListServices:
      for (const std::string& name : service_names_) {
        response.mutable_list_services_response()->add_service()->set_name(
            name);
      }
      break;
    case ServerReflectionRequest::MESSAGE_REQUEST_NOT_SET:
      SetError(grpc::StatusCode::UNIMPLEMENTED,
               "message_request: one of file_by_filename, "
               "file_containing_symbol, file_containing_extension, "
               "all_extension_numbers_of_type or list_services is required",
               &response);
      break;
  }
  if (file != nullptr) {
    std::set<std::string> added;
    AddFileAndImports(*file, &added,
                      response.mutable_file_descriptor_response());
  }
  return response;
}

}  // namespace tributary
