#include "server/http_message.h"

#include <algorithm>

#include "absl/strings/match.h"

namespace tributary {

std::optional<std::string> HttpRequest::Header(absl::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (absl::EqualsIgnoreCase(key, name)) return value;
  }
  return std::nullopt;
}

void HttpResponse::SetHeader(std::string name, std::string value) {
  headers.erase(std::remove_if(headers.begin(), headers.end(),
                               [&](const auto& h) {
                                 return absl::EqualsIgnoreCase(h.first, name);
                               }),
                headers.end());
  headers.emplace_back(std::move(name), std::move(value));
}

}  // namespace tributary
