#include "server/http_reply.h"

#include <memory>

#include "absl/strings/match.h"
#include "httplib.h"

namespace tributary {

using nlohmann::json;

std::string DumpJson(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

void ReplyJson(httplib::Response* response, int status, const json& body,
               const std::string& request_id, int retry_after_seconds) {
  response->status = status;
  if (!request_id.empty()) response->set_header("X-Request-Id", request_id);
  if (retry_after_seconds > 0) {
    response->set_header("Retry-After", std::to_string(retry_after_seconds));
  }
  response->set_content(DumpJson(body) + "\n", "application/json");
}

void ReplyError(httplib::Response* response, const OpenAiError& error,
                const std::string& request_id) {
  ReplyJson(response, error.http_status, error.ToJson(), request_id,
            error.retry_after_seconds);
}

void ReplyErrorAndClose(const httplib::Request& request,
                        httplib::Response* response, const OpenAiError& error,
                        const std::string& request_id) {
  response->status = error.http_status;
  if (!request_id.empty()) response->set_header("X-Request-Id", request_id);
  if (!absl::EqualsIgnoreCase(request.get_header_value("Connection"), "close")) {
    response->set_header("Connection", "close");
  }
  // cpp-httplib keeps a connection open after any response it wrote in
  // full; a content provider that fails after writing the whole body is
  // its one way to have the connection closed.
  auto text = std::make_shared<std::string>(DumpJson(error.ToJson()) + "\n");
  response->set_content_provider(
      text->size(), "application/json",
      [text](size_t offset, size_t length, httplib::DataSink& sink) {
        sink.write(text->data() + offset, length);
        return false;
      });
}

}  // namespace tributary
