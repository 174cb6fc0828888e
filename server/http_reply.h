// Writing the OpenAI-compatible API's answers into an HttpResponse: a JSON
// body (always with the request id) and the OpenAI error shape. Shared by
// the router (http_server) and the completion handler.
#ifndef TRIBUTARY_SERVER_HTTP_REPLY_H_
#define TRIBUTARY_SERVER_HTTP_REPLY_H_

#include <string>

#include "nlohmann/json.hpp"
#include "server/http_message.h"
#include "server/openai_protocol.h"

namespace tributary {

// JSON as the API writes it: compact, invalid UTF-8 replaced (never
// thrown).
std::string DumpJson(const nlohmann::json& j);

// `status` with `body` (and a final newline); X-Request-Id when
// `request_id` is set, Retry-After when `retry_after_seconds` > 0.
void ReplyJson(HttpResponse* response, int status, const nlohmann::json& body,
               const std::string& request_id, int retry_after_seconds = 0);
void ReplyError(HttpResponse* response, const OpenAiError& error,
                const std::string& request_id);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_REPLY_H_
