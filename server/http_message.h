// One HTTP/1.1 exchange as the listener (http_listener.h) hands it to the
// API's router (http_server.h): the request as read (head and whole body,
// its Content-Encoding undone) and the response the router fills (a whole
// body, or a streamed one written as it is produced). Plain data: no I/O.
#ifndef TRIBUTARY_SERVER_HTTP_MESSAGE_H_
#define TRIBUTARY_SERVER_HTTP_MESSAGE_H_

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace tributary {

struct HttpRequest {
  std::string method;  // as sent, e.g. "GET"
  std::string target;  // as sent: the path and any query
  std::string path;    // the target up to its '?'
  int version = 11;    // 10 or 11 (HTTP/1.0, HTTP/1.1)
  // In arrival order; names as sent (they compare case-insensitively).
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;  // decoded; empty when the request had none
  // The connection's socket, for ClientWatch (client_watch.h): open while
  // the request is served, never read or written by the router.
  int socket_fd = -1;

  // The first header of that name (case-insensitive); nullopt when absent.
  std::optional<std::string> Header(absl::string_view name) const;
  bool HasHeader(absl::string_view name) const {
    return Header(name).has_value();
  }
};

// Where a streamed body goes: each Write is sent as it is (one HTTP chunk)
// before Write returns.
class HttpBodyWriter {
 public:
  virtual ~HttpBodyWriter() = default;
  // False when the client went away or did not take the bytes within the
  // write timeout: the connection is then closed, and later writes fail.
  virtual bool Write(absl::string_view data) = 0;
};

struct HttpResponse {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type;  // empty: no Content-Type
  std::string body;          // unless `stream` is set
  // Close the connection after this answer (a request whose rest could not
  // be read, or a refusal the client should not repeat on the connection).
  bool close_connection = false;
  // A streamed body (HTTP/1.1 chunked; HTTP/1.0: until the connection
  // closes). Runs after the status line and headers went out, on the
  // thread that filled the response; true when the stream ended cleanly
  // (the last chunk is then written), false to cut the connection.
  std::function<bool(HttpBodyWriter&)> stream;
  // With `stream`: runs once after the stream ended or was abandoned (also
  // when `stream` never ran: the head could not be written), on the same
  // thread.
  std::function<void()> on_done;

  // Replaces any header of that name (case-insensitive).
  void SetHeader(std::string name, std::string value);
};

}  // namespace tributary

#endif  // TRIBUTARY_SERVER_HTTP_MESSAGE_H_
