#include "server/http_reply.h"

namespace tributary {

using nlohmann::json;

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void ReplyJson(HttpResponse* response, int status, const json& body,
               const std::string& request_id, int retry_after_seconds) {
  response->status = status;
  if (!request_id.empty()) response->SetHeader("X-Request-Id", request_id);
  if (retry_after_seconds > 0) {
    response->SetHeader("Retry-After", std::to_string(retry_after_seconds));
  }
  response->content_type = "application/json";
  response->body = DumpJson(body) + "\n";
}

void ReplyError(HttpResponse* response, const OpenAiError& error,
                const std::string& request_id) {
  ReplyJson(response, error.http_status, error.ToJson(), request_id,
            error.retry_after_seconds);
}

}  // namespace tributary
