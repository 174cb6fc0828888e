// POST /v1/completions and /v1/chat/completions of the OpenAI-compatible
// HTTP API, on one of the listener's worker threads (http_server.h routes
// here):
// parse and validate (openai_protocol, RequestConverter), submit to the
// engine, then
//   - not streaming: wait for the final event, then one JSON body with the
//     real status (200, or the error's code);
//   - streaming: 200 with Server-Sent Events, written as engine events come
//     (HttpResponse::stream, on the same worker thread: one chunk per SSE
//     event, nothing buffered beyond what arrived since the last write).
// Either way the worker thread waits on the request's HttpGeneration
// (the engine thread only enqueues: openai_stream.h) and watches the socket
// (client_watch.h): a client that disconnects cancels its sequence.
// Requests are recorded like gRPC ones (GenerationRecord: metrics and the
// JSON log line, method "OpenAI.Completions" / "OpenAI.ChatCompletions").
#ifndef TRIBUTARY_SERVER_COMPLETION_HANDLER_H_
#define TRIBUTARY_SERVER_COMPLETION_HANDLER_H_

#include <string>

#include "server/http_message.h"
#include "server/openai_protocol.h"
#include "server/service_context.h"

namespace tributary {

class CompletionHandler {
 public:
  // `service` and `served_model` outlive the handler and every request.
  CompletionHandler(ServiceContext& service, const std::string& served_model);

  // One request whose route, method and bearer token were checked (its
  // body read whole by the listener). Fills `response`: a body, or for a
  // stream a writer that runs after the headers went out, on this thread.
  void Serve(OpenAiEndpoint endpoint, const std::string& request_id,
             const HttpRequest& request, HttpResponse* response);

 private:
  ServiceContext& service_;
  const std::string& served_model_;
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_COMPLETION_HANDLER_H_
