// gRPC server reflection (grpc.reflection.v1alpha.ServerReflection, what
// grpcurl and grpc_cli ask), served from the generated code of
// proto/grpc/reflection/v1alpha/reflection.proto rather than by gRPC's
// reflection plugin, so that it can require the bearer token as the API
// does: reflection describes the API, down to every field.
//
// Why our own service: gRPC 1.51 has no hook that can refuse a call of a
// service it registers itself. A server interceptor cannot end a call with
// a status of its choice (grpc/grpc#24017), an AuthMetadataProcessor
// needs secure credentials (the plaintext port would abort), and the
// authorization policy engine answers PERMISSION_DENIED and compares the
// header byte for byte. Here the token is checked as for every other
// method (ServiceContext::CheckAuth); health stays open, for probes.
//
// The answers come from the process's generated descriptor pool: a file
// with every file it imports (directly or not, each once per answer), by
// file name, by a symbol it defines or by an extension; the extension
// numbers of a message type; the names of the services the API port
// serves. A request that names nothing is answered UNIMPLEMENTED, an
// unknown name NOT_FOUND, in the response's error_response, as the
// protocol asks; bytes that are no ServerReflectionRequest end the call
// with INVALID_ARGUMENT (message_bytes.h). One request is answered at a
// time, in order, until the client half-closes. Thread-safe.
#ifndef TRIBUTARY_SERVER_REFLECTION_SERVICE_H_
#define TRIBUTARY_SERVER_REFLECTION_SERVICE_H_

#include <string>
#include <vector>

#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "server/service_context.h"

namespace tributary {

class ReflectionService final
    : public grpc::reflection::v1alpha::ServerReflection::
          WithRawCallbackMethod_ServerReflectionInfo<
              grpc::reflection::v1alpha::ServerReflection::Service> {
 public:
  // `service` checks the token (and outlives this); `service_names` are
  // the fully-qualified names list_services answers.
  ReflectionService(const ServiceContext& service,
                    std::vector<std::string> service_names);

  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>*
  ServerReflectionInfo(grpc::CallbackServerContext* call) override;

 private:
  class Reactor;
  // The answer to one request.
  grpc::reflection::v1alpha::ServerReflectionResponse Answer(
      const grpc::reflection::v1alpha::ServerReflectionRequest& request) const;

  const ServiceContext& service_;
  const std::vector<std::string> service_names_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_REFLECTION_SERVICE_H_
