// Writing the OpenAI-compatible API's answers into a cpp-httplib Response:
// a JSON body (always with the request id) and the OpenAI error shape.
// Shared by the router (http_server) and the completion handler.
#ifndef TRIBUTARY_SERVER_HTTP_REPLY_H_
#define TRIBUTARY_SERVER_HTTP_REPLY_H_

#include <string>

#include "nlohmann/json.hpp"
#include "server/openai_protocol.h"

namespace httplib {
struct Request;
struct Response;
}

namespace tributary {

// JSON as the API writes it: compact, invalid UTF-8 replaced (never
// thrown).
std::string DumpJson(const nlohmann::json& j);

// `status` with `body` (and a final newline); X-Request-Id when
// `request_id` is set, Retry-After when `retry_after_seconds` > 0.
void ReplyJson(httplib::Response* response, int status,
               const nlohmann::json& body, const std::string& request_id,
               int retry_after_seconds = 0);
void ReplyError(httplib::Response* response, const OpenAiError& error,
                const std::string& request_id);

// The same error, after which the connection is closed: for a request
// whose body was not read to its end (what is left of it would be parsed
// as the next request). `request` is the one answered: when it asked for
// `Connection: close` itself, cpp-httplib writes that header, so it is not
// written twice.
void ReplyErrorAndClose(const httplib::Request& request,
                        httplib::Response* response, const OpenAiError& error,
                        const std::string& request_id);

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_REPLY_H_
