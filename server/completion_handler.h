// POST /v1/completions and /v1/chat/completions of the OpenAI-compatible
// HTTP API, on the request's connection thread (http_server.h routes here):
// parse and validate (openai_protocol, RequestConverter), submit to the
// engine, then
//   - not streaming: wait for the final event, then one JSON body with the
//     real status (200, or the error's code);
//   - streaming: 200 with Server-Sent Events, written as engine events come
//     (a cpp-httplib chunked content provider: one chunk per SSE event,
//     nothing buffered beyond what arrived since the last write).
// Either way the connection thread waits on the request's HttpGeneration
// (the engine thread only enqueues: openai_stream.h) and watches the socket
// (client_watch.h): a client that disconnects cancels its sequence.
// Requests are recorded like gRPC ones (GenerationRecord: metrics and the
// JSON log line, method "OpenAI.Completions" / "OpenAI.ChatCompletions").
#ifndef TRIBUTARY_SERVER_COMPLETION_HANDLER_H_
#define TRIBUTARY_SERVER_COMPLETION_HANDLER_H_

#include <optional>
#include <string>

#include "server/openai_protocol.h"
#include "server/service_context.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace tributary {

class CompletionHandler {
 public:
  // `service` and `served_model` outlive the handler and every request.
  CompletionHandler(ServiceContext& service, const std::string& served_model);

  // One request whose route, method and bearer token were checked. `body`
  // is nullopt when it was over --max-message-bytes (413); `body_complete`
  // is false when its rest was left unread (the connection then closes
  // after the answer). Fills `response`: a body, or for a stream a content
  // provider that runs after the headers went out, on this thread.
  void Serve(OpenAiEndpoint endpoint, const std::string& request_id,
             const std::optional<std::string>& body, bool body_complete,
             const httplib::Request& request, httplib::Response* response);

 private:
  ServiceContext& service_;
  const std::string& served_model_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_COMPLETION_HANDLER_H_
